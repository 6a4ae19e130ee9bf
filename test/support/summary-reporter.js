// Prints the closing line CI reads ("jest: N passed, N failed") and keeps it in
// test-results/summary.txt so .ci/run can repeat it as its last line. A second
// run beside the main one (.ci/run's Node 24 run) names its own file with
// JEST_SUMMARY_FILE (relative to the repository root), so the main run's line stays.
const { mkdirSync, writeFileSync } = require('node:fs');
const { dirname, resolve } = require('node:path');

class SummaryReporter {
  constructor(globalConfig) {
    this.file = resolve(globalConfig.rootDir, process.env.JEST_SUMMARY_FILE || 'test-results/summary.txt');
  }

  onRunComplete(_contexts, results) {
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    let line = `jest: ${results.numPassedTests} passed, ${failed} failed`;
    if (results.numPendingTests) line += `, ${results.numPendingTests} skipped`;
    mkdirSync(dirname(this.file), { recursive: true });
    writeFileSync(this.file, line + '\n');
    process.stdout.write(`\n${line}\n`);
  }
}

module.exports = SummaryReporter;
