import { createHook } from 'node:async_hooks';

/**
 * Keeps one `process.nextTick` tick object alive for the life of the process, so that every later tick object is
 * built on V8's fast path. Imported for its effect, first thing in the server entry point.
 *
 * Why: Node's nextTick builds each tick as an object literal with computed keys (`{ [async_id_symbol]: …,
 * [trigger_async_id_symbol]: …, callback, args }`). V8 caches the hidden-class (map) transitions of that literal in
 * its feedback, and only weakly. A full garbage collection at a moment when no tick object is alive (start-up
 * does this: migrations, module loading) frees those maps; the next tick then meets a map its feedback does not
 * know, and V8's runtime marks the literal MEGAMORPHIC for good. From then on every tick (the HTTP stack makes
 * ~27 a request: stream ends, writes, socket resumes) defines its properties through the runtime, migrating maps
 * each time. Measured with callgrind on GET /posts/{id}: ~22,000 of ~193,000 instructions a request, against 0 in
 * a bare Fastify process whose start-up happens to collect no garbage in between. A live tick object keeps its
 * map, and through the map's back pointers every map before it, so the feedback stays MONOMORPHIC with live maps.
 *
 * How: async_hooks hands a new tick object to an `init` hook as its resource; the hook is enabled for exactly one
 * nextTick and disabled again (with no hook left, Node removes its promise and tick hooks, so nothing is paid per
 * request). test/runtime/tick-shape.test.ts checks the feedback state with V8's own DebugPrint.
 * This runs once, when the module is first imported.
 */
/** The kept tick object; exported so that the module's namespace holds it for as long as the process runs. */
export let kept: object | undefined;
const hook = createHook({
  init(_asyncId, type, _triggerAsyncId, resource) {
    if (type === 'TickObject' && kept === undefined) kept = resource as object;
  },
});
hook.enable();
try {
  process.nextTick(() => {});
} finally {
  hook.disable();
}
