// Kept only so that code written against the old single file still compiles while branches merge: the port's
// types are in docker-port.ts and its dockerode implementation in dockerode-engine.ts. Import from those.
export * from './docker-port.ts';
export { createDockerEngine, normalizePlatform } from './dockerode-engine.ts';
