// Types of sdk.mjs (the SDK is plain JavaScript so it runs unchanged inside the sandboxes).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export type LifecycleHookName = 'onCreate' | 'onStart' | 'onPause' | 'onResume' | 'onStop';

export interface AppIdentity {
  appId: string;
  instanceId: string;
}

export interface HookContext extends AppIdentity {
  hook: LifecycleHookName;
}

export interface LifecycleHandlers {
  /** Extra fields for the health body; throwing answers 503 (identity is still stamped). */
  health?: (identity: AppIdentity) => Record<string, unknown> | void | Promise<Record<string, unknown> | void>;
  onCreate?: (body: unknown, ctx: HookContext) => unknown;
  onStart?: (body: unknown, ctx: HookContext) => unknown;
  onPause?: (body: unknown, ctx: HookContext) => unknown;
  onResume?: (body: unknown, ctx: HookContext) => unknown;
  onStop?: (body: unknown, ctx: HookContext) => unknown;
}

export interface AppSdkOptions {
  /** Default: $APP_ID. */
  appId?: string;
  /** Default: $APP_INSTANCE_ID. */
  instanceId?: string;
  /** manifest.lifecycle.basePath: '' or '/docs'. */
  basePath?: string;
  handlers?: LifecycleHandlers;
}

export interface AppServerOptions extends AppSdkOptions {
  /** Every request that is not a lifecycle route. */
  handler?: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
}

export type LifecycleMiddleware = (req: IncomingMessage, res: ServerResponse, next?: () => void) => boolean;

export declare const LIFECYCLE_HOOKS: readonly LifecycleHookName[];
export declare const IDENTITY_HEADERS: { readonly appId: 'x-app-id'; readonly instanceId: 'x-app-instance-id' };
export declare function resolveIdentity(opts?: Partial<AppIdentity>): AppIdentity;
export declare function normalizeBasePath(basePath?: string): string;
export declare function stampIdentity(res: ServerResponse, identity: AppIdentity): void;
export declare function createLifecycleMiddleware(opts?: AppSdkOptions): LifecycleMiddleware;
export declare function createAppServer(opts?: AppServerOptions): Server;
