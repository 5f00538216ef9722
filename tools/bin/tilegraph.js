#!/usr/bin/env node
// Launcher of the `tilegraph` command: the CLI itself is compiled TypeScript in ../dist.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(cli))) {
  process.stderr.write('tilegraph: the command is not built yet: run `npm run build` in the tilegraph folder\n');
  process.exit(2);
}
const { runCli } = await import(cli.href);
await runCli(process.argv.slice(2));
