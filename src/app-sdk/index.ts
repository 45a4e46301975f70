// `runlog/app-sdk`: what an app links to be a good runlog citizen (identity on every response, lifecycle
// routes). The implementation is the dependency-free JavaScript in sdk.mjs (so it runs in the sandboxes).
export {
  LIFECYCLE_HOOKS,
  IDENTITY_HEADERS,
  resolveIdentity,
  normalizeBasePath,
  stampIdentity,
  createLifecycleMiddleware,
  createAppServer,
} from './sdk.mjs';
export type {
  LifecycleHookName,
  AppIdentity,
  HookContext,
  LifecycleHandlers,
  AppSdkOptions,
  AppServerOptions,
  LifecycleMiddleware,
} from './sdk.mjs';
