// Prints the closing line CI reads ("jest: N passed, N failed") and keeps it in
// test-results/summary.txt so .ci/run can repeat it as its last line.
const { mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

class SummaryReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
  }

  onRunComplete(_contexts, results) {
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    let line = `jest: ${results.numPassedTests} passed, ${failed} failed`;
    if (results.numPendingTests) line += `, ${results.numPendingTests} skipped`;
    const dir = join(this.rootDir, 'test-results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'summary.txt'), line + '\n');
    process.stdout.write(`\n${line}\n`);
  }
}

module.exports = SummaryReporter;
