// Every bench entry point and worker runs through here: a failed run prints its error and exits
// at once. Connections a failed scenario left open (a contestant's, reconnecting to the server
// the run already stopped) would otherwise keep the process alive, printing ECONNREFUSED for good.
export function runMain(main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
