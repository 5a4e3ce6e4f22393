// An unhandled rejection anywhere in a test file fails that file instead of going unnoticed.
const unhandled: unknown[] = [];
const record = (reason: unknown): void => {
  unhandled.push(reason);
};
process.on('unhandledRejection', record);

afterAll(async () => {
  // Let rejections from the last test's tail surface before judging.
  await new Promise((resolve) => setTimeout(resolve, 50));
  process.off('unhandledRejection', record);
  expect(unhandled).toEqual([]);
});
