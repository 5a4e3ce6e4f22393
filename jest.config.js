/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/__tests__'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest'] },
  globalSetup: '<rootDir>/__tests__/helpers/globalSetup.ts',
  setupFilesAfterEnv: ['<rootDir>/__tests__/helpers/failOnUnhandled.ts'],
  testTimeout: 30_000,
  // Two cores: two workers keep private redis-servers from starving each other.
  maxWorkers: 2,
};
