// A process that materializes one volume on the real Docker Engine (test/int/executions/materialize-cross-process.test.ts), as a
// supervisor of another node on the same machine would. Usage:
//   materialize-child.ts <request-json>
// request: { kind: 'runtime' | 'code', image, exportPath?, codeFile?, labels, maxEntries, holdAt?: '<step>:<phase>' }
// It says `ready` on stderr and waits for a line on stdin before it starts (so that two children start together).
// With holdAt, it says `at <step>:<phase>` on stderr when the copy gets there and waits for another line on stdin
// (or for SIGKILL). Its result (or error) is one JSON line on stdout.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { DEFAULT_ARCHIVE_LIMITS } from '../../src/domain/at-run/archive-limits.ts';
import { createDockerEngine } from '../../src/adapters/docker/dockerode-engine.ts';
import { createMaterializer } from '../../src/adapters/docker/materializer.ts';
import type { MaterializeProgress } from '../../src/adapters/docker/materialize-steps.ts';

interface Request {
  kind: 'runtime' | 'code';
  image: string;
  exportPath?: string;
  codeFile?: string;
  labels: Record<string, string>;
  maxEntries: number;
  holdAt?: string;
}

const req = JSON.parse(process.argv[2]!) as Request;
const lines = createInterface({ input: process.stdin });
const waiting: ((line: string) => void)[] = [];
lines.on('line', (l) => waiting.shift()?.(l));
const nextLine = () => new Promise<string>((resolve) => waiting.push(resolve));

const materializer = createMaterializer(createDockerEngine(), {
  labels: req.labels,
  limits: { ...DEFAULT_ARCHIVE_LIMITS, maxEntries: req.maxEntries },
});
const steps: string[] = [];
const onProgress = async (p: MaterializeProgress) => {
  const at = `${p.step}:${p.phase}`;
  if (p.step !== 'pull' || p.phase === 'done') steps.push(at);
  process.stderr.write(`step ${at}\n`);
  if (at === req.holdAt) {
    process.stderr.write(`at ${at}\n`);
    await nextLine();
  }
};

process.stderr.write('ready\n');
await nextLine();
try {
  const result =
    req.kind === 'runtime'
      ? await materializer.materializeRuntime({ image: req.image, exportPath: req.exportPath!, onProgress })
      : await materializer.materializeCode({
          archive: readFileSync(req.codeFile!),
          carrierImage: req.image,
          onProgress,
        });
  process.stdout.write(`${JSON.stringify({ ok: true, result, steps })}\n`);
} catch (err) {
  process.stdout.write(
    `${JSON.stringify({ ok: false, code: (err as { code?: string }).code ?? null, message: (err as Error).message, steps })}\n`,
  );
}
lines.close();
