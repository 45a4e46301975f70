// The labels of a materialized volume and the name of its seal: what the sandbox, the reconciler and the
// materializer read to tell a complete copy from an unfinished one.
//
// A volume counts only once its seal volume exists (the materializer creates it after the verdict), so whoever
// mounts or cleans up materialized volumes needs the same names; they live here, apart from the copying itself.
export const LABEL_VOLUME_KIND = 'runlog.volume-kind';
export const LABEL_CACHE_KEY = 'runlog.cache-key';
export const LABEL_SEAL_FOR = 'runlog.seal-for';
export const LABEL_MATERIALIZING = 'runlog.materializing';
export const SEAL_SUFFIX = '-sealed';
