import { createHook } from 'node:async_hooks';

/**
 * Keeps one `process.nextTick` tick object alive for the life of the process, so that every later tick object is
 * built on V8's fast path. Imported for its effect, first thing in the server entry point; `KEEP_TICK_SHAPE=off`
 * turns it off, so that `npm run bench -- --env KEEP_TICK_SHAPE=off` re-measures what it buys.
 *
 * Why: Node's nextTick builds each tick as an object literal with computed keys (`{ [async_id_symbol]: …,
 * [trigger_async_id_symbol]: …, callback, args }`). V8 keeps the hidden-class (map) transitions of that literal in
 * its feedback only weakly. A full garbage collection at a moment when no tick object is alive (start-up does this:
 * migrations, module loading) frees those maps; the next tick meets a map its feedback does not know, and V8 marks
 * the literal megamorphic for good. From then on every tick (the HTTP stack makes ~27 a request: stream ends,
 * writes, socket resumes) defines its properties through the runtime. Whether that happens depends on what start-up
 * allocates: the heap flags of `npm start` avoided it until 11-27, and the start-up of 11-28 no longer does, which
 * is why counted runs of one commit came out in two groups (bench/README.md, "Figures behind choices in the code").
 *
 * How: async_hooks hands a new tick object to an `init` hook as its resource; the hook is enabled for exactly one
 * nextTick and disabled again (with no hook left, Node removes its promise and tick hooks, so nothing is paid per
 * request). test/runtime/tick-shape.test.ts checks the literal's feedback with V8's own DebugPrint.
 */
let kept: object | undefined;

export function keepTickObjectShape(): object | undefined {
  if (kept !== undefined) return kept;
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
  return kept;
}

if (process.env.KEEP_TICK_SHAPE !== 'off') keepTickObjectShape();
