import { describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { expectNo5xx, send, useRaceServer } from './race-helpers.js';

describe(`sign-up races (${backend})`, () => {
  const race = useRaceServer();

  // Ten spellings of one name: the unique key on the lower-cased username must decide, not a check-then-insert.
  const spellings = (name: string) =>
    Array.from({ length: 10 }, (_, i) =>
      [...name].map((ch, j) => ((i >> j) % 2 === 1 || (i === 9 && j % 2 === 0) ? ch.toUpperCase() : ch)).join(''),
    );

  it.each(['racename', 'samename_2', 'third_one'])('10 concurrent sign-ups as "%s" in different cases: one 201, nine 409, one row', async (name) => {
    const names = spellings(name);
    expect(new Set(names).size).toBe(10);
    const responses = await Promise.all(names.map((username) => send(race, 'POST', '/users', { body: { username, password: 'race password 1' } })));
    expectNo5xx(responses);
    expect(responses.map((r) => r.status).sort()).toEqual([201, ...Array<number>(9).fill(409)]);
    for (const conflict of responses.filter((r) => r.status === 409)) {
      expect(conflict.json()).toMatchObject({ status: 409, errors: [{ field: 'username' }] });
    }
    const winner = responses.find((r) => r.status === 201)?.json<{ id: number; username: string }>();
    const rows = await race.db.selectFrom('users').select(['id', 'username']).where('username_key', '=', name).execute();
    expect(rows).toEqual([{ id: winner?.id, username: winner?.username }]);
  });
});
