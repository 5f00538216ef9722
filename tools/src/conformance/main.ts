#!/usr/bin/env node
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatReport, listConformanceTests, runConformanceTests, summarize } from './harness.js';

/**
 * npm run conformance -- [DIR] [--report FILE] [--filter SUBSTR] [--jobs N] [--timeout SECONDS]
 *                        [--check-record] [--update-record] [--quiet]
 *
 * Runs the ONNX backend node tests through import + the reference interpreter, prints a by-op
 * table, the failing tests and the counts, and writes a JSON report. The record of passed tests
 * (conformance-record.json) guards against regressions: --check-record fails when fewer pass.
 */

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const RECORD = path.join(repoRoot, 'conformance-record.json');

interface Args {
  dir: string;
  report: string;
  filter?: string;
  jobs: number;
  timeoutS: number;
  checkRecord: boolean;
  updateRecord: boolean;
  quiet: boolean;
}

const USAGE = 'usage: conformance [DIR] [--report FILE] [--filter SUBSTR] [--jobs N] [--timeout SECONDS] [--check-record] [--update-record] [--quiet]';

function parseArgs(argv: readonly string[]): Args {
  const args: Args = {
    dir: path.resolve(repoRoot, '../shared/conformance/onnx-node'),
    report: path.join(repoRoot, 'reports/conformance.json'),
    jobs: Math.max(1, Math.min(2, os.availableParallelism?.() ?? os.cpus().length)),
    timeoutS: 60,
    checkRecord: false,
    updateRecord: false,
    quiet: false,
  };
  let dirGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value\n${USAGE}`);
      return v;
    };
    const count = (what: string): number => {
      const v = Number(value());
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${what} must be a positive number\n${USAGE}`);
      return v;
    };
    switch (a) {
      case '--report':
        args.report = path.resolve(value());
        break;
      case '--filter':
        args.filter = value();
        break;
      case '--jobs':
        args.jobs = Math.floor(count('--jobs'));
        break;
      case '--timeout':
        args.timeoutS = count('--timeout');
        break;
      case '--check-record':
        args.checkRecord = true;
        break;
      case '--update-record':
        args.updateRecord = true;
        break;
      case '--quiet':
        args.quiet = true;
        break;
      case '-h':
      case '--help':
        console.log(USAGE);
        process.exit(0);
      default:
        if (a.startsWith('-') || dirGiven) throw new Error(`unexpected argument '${a}'\n${USAGE}`);
        args.dir = path.resolve(a);
        dirGiven = true;
    }
  }
  return args;
}

function readRecord(): number | undefined {
  try {
    const r = JSON.parse(fs.readFileSync(RECORD, 'utf8')) as { passed?: unknown };
    return typeof r.passed === 'number' ? r.passed : undefined;
  } catch {
    return undefined;
  }
}

async function main(): Promise<number> {
  let args: Args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error((e as Error).message);
    return 2;
  }
  if (!fs.existsSync(args.dir) || !fs.statSync(args.dir).isDirectory()) {
    console.error(`conformance: no test folder at ${args.dir}`);
    return 2;
  }
  const tests = listConformanceTests(args.dir, args.filter);
  if (tests.length === 0) {
    console.error(`conformance: no tests in ${args.dir}${args.filter ? ` matching '${args.filter}'` : ''}`);
    return 2;
  }
  const results = await runConformanceTests(tests, {
    jobs: args.jobs,
    timeoutMs: args.timeoutS * 1000,
    onResult: (r, done, total) => {
      if (!args.quiet && process.stderr.isTTY) process.stderr.write(`\r[${done}/${total}] ${r.name.slice(0, 60).padEnd(60)}`);
    },
  });
  if (!args.quiet && process.stderr.isTTY) process.stderr.write('\r' + ' '.repeat(80) + '\r');
  const rep = summarize(args.dir, results);
  console.log(formatReport(rep, { byOp: !args.quiet }));
  fs.mkdirSync(path.dirname(args.report), { recursive: true });
  fs.writeFileSync(args.report, JSON.stringify(rep, null, 2) + '\n');
  console.log(`report written to ${path.relative(process.cwd(), args.report) || args.report}`);

  const record = readRecord();
  if (args.updateRecord) {
    fs.writeFileSync(RECORD, JSON.stringify({ passed: rep.counts.passed }, null, 2) + '\n');
    console.log(`record updated: ${rep.counts.passed} passed (was ${record ?? 'none'})`);
  }
  if (args.checkRecord) {
    if (record === undefined) {
      console.error(`conformance: no record in ${RECORD}`);
      return 1;
    }
    if (rep.counts.passed < record) {
      console.error(`conformance: ${rep.counts.passed} tests passed, fewer than the record of ${record}`);
      return 1;
    }
    console.log(`record kept: ${rep.counts.passed} passed >= ${record}`);
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e instanceof Error ? e.stack ?? e.message : String(e));
    process.exit(1);
  },
);
