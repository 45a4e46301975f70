// Copying an image's export directory: opening its download, and streaming what passes validation into the carrier.
//
// The download is opened from the never-started source container; the Engine's answer says whether the path
// exists and is a directory, and those failures are mapped to errors that name the image and the path. The body
// is then validated as it arrives while what passed so far is uploaded into the carrier (one PUT), and the copy
// counts only if the verdict on the whole export is yes.
import {
  ArchiveRejectedError,
  ArchiveStreamAbandonedError,
  validateArchiveStream,
  type ArchiveLimits,
  type ArchiveReport,
} from '../archive/index.ts';
import type { DockerEngine } from './docker-port.ts';
import { DockerNotFoundError, MaterializationError } from './errors.ts';
import { MATERIALIZE_TARGET } from './layout.ts';
import type { StepRunner } from './materialize-steps.ts';

/** An export download whose Engine answer (the path's stat) has arrived; its body is not read yet. */
export interface Opened {
  body: AsyncIterable<Buffer>;
}

/** Ends a download that will not be read (its generator's cleanup runs only once it has started). */
export async function discard(body: AsyncIterable<Buffer>): Promise<void> {
  const it = body[Symbol.asyncIterator]();
  try {
    await it.next();
  } catch {
    // a download that failed is over already
  } finally {
    await it.return?.(undefined)?.catch(() => undefined);
  }
}

/** The export's download from the source container, once the Engine has answered that it is a directory. */
export async function openExport(
  engine: DockerEngine,
  sourceId: string,
  image: string,
  exportPath: string,
  maxArchiveBytes: number,
  step: StepRunner,
): Promise<Opened> {
  // One GET: the Engine answers with the path's stat in a header, then the tar as it is read.
  const { stat, body } = await step('download', async () => {
    try {
      return await engine.openArchive(
        sourceId,
        exportPath,
        maxArchiveBytes,
        (max) =>
          new MaterializationError(
            'EXPORT_TOO_LARGE',
            'download',
            `the export ${exportPath} of ${image} is larger than ${max} bytes`,
            { image, exportPath },
          ),
      );
    } catch (err) {
      if (err instanceof DockerNotFoundError) {
        throw new MaterializationError(
          'EXPORT_PATH_NOT_FOUND',
          'download',
          `image ${image} has no ${exportPath}`,
          { image, exportPath },
          { cause: err },
        );
      }
      throw err;
    }
  });
  // Go's os.FileMode bits as the Engine reports them: ModeDir = 1<<31, ModeSymlink = 1<<27.
  if (stat && (stat.mode & 0x80000000) === 0) {
    await discard(body); // close the download
    const what = stat.mode & 0x08000000 ? `a symbolic link (to ${stat.linkTarget})` : 'not a directory';
    throw new MaterializationError('EXPORT_PATH_NOT_DIRECTORY', 'download', `${exportPath} in ${image} is ${what}`, {
      image,
      exportPath,
    });
  }
  return { body };
}

/** Validates the opened export on the way into the carrier's /at-run-output; what went in, once all of it passed. */
export async function copyValidatedExport(
  engine: DockerEngine,
  containerId: string,
  opened: Opened,
  limits: ArchiveLimits,
  stripPrefix: string,
  step: StepRunner,
): Promise<{ entries: number; bytes: number }> {
  const body = opened.body;
  // The download is validated as it arrives and what passed so far is uploaded meanwhile (one PUT); the
  // volume counts only if the verdict on the whole export is yes (see the head of this file).
  const stream = validateArchiveStream(body, limits, { kind: 'runtime', stripPrefix });
  const [uploaded, validated] = await Promise.allSettled([
    step('upload', () => engine.putArchive(containerId, MATERIALIZE_TARGET, stream.pieces)),
    step('validate', async (): Promise<ArchiveReport> => {
      const report = await stream.report;
      if (!report.ok) throw new ArchiveRejectedError(report.violations); // every violation, not only the first
      return report;
    }),
  ]);
  // The verdict decides first; an upload cut off because of it says less.
  if (
    validated.status === 'rejected' &&
    !(validated.reason instanceof ArchiveStreamAbandonedError && uploaded.status === 'rejected')
  )
    throw validated.reason;
  if (uploaded.status === 'rejected') throw uploaded.reason;
  if (validated.status === 'rejected') throw validated.reason;
  return { entries: validated.value.entries.length, bytes: validated.value.expandedBytes };
}
