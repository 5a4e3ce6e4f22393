// How the `rlock` command ends (also in its --help): 0 done; 1 nothing to force-unlock; 2 bad
// usage or input; 3 Redis unreachable or failing.
export const EXIT_NOTHING = 1;
export const EXIT_USAGE = 2;
export const EXIT_REDIS = 3;

/** An error that ends the command with one line and an exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}
