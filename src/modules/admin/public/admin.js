// The moderation page (GET /admin): a plain ES module that talks to the public API with fetch, on the origin it was
// loaded from. The token lives in sessionStorage, so it is kept for this tab only; signing out revokes it.
// Every text that comes from the API is set with textContent, never parsed as HTML.

const SESSION = 'corkboard-admin-session';
let session = JSON.parse(sessionStorage.getItem(SESSION) ?? 'null');

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes). */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) if (child !== undefined && child !== null) node.append(child);
  return node;
}

/** Replaces a node's children, skipping the empty ones (DOM's replaceChildren would write "undefined"). */
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((child) => child !== undefined && child !== null && child !== false));
}

function announce(text) {
  $('status').textContent = text;
}

/** A call to the API: { status, ok, data, etag, next } (next: the path of the Link rel="next", if any). */
async function api(method, path, { body, headers = {} } = {}) {
  const response = await fetch(path, {
    method,
    headers: {
      ...(session ? { authorization: `Bearer ${session.token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (response.status === 401 && session && path !== '/tokens') {
    forget();
    announce('Your session has ended (the token was revoked or expired). Sign in again.');
  }
  return { status: response.status, ok: response.ok, data, etag: response.headers.get('etag'), next: nextPath(response.headers.get('link')) };
}

/** The path and query of a Link header's rel="next" (its host is the service's PUBLIC_URL, maybe not this origin). */
function nextPath(link) {
  const match = link && /<([^>]+)>;\s*rel="next"/.exec(link);
  if (!match) return undefined;
  const url = new URL(match[1]);
  return url.pathname + url.search;
}

/** What went wrong, in the API's words (a problem's detail). */
const problem = (answer) => answer.data?.detail ?? answer.data?.title ?? `HTTP ${answer.status}`;

// ---- signing in and out -------------------------------------------------------------------------------------

function forget() {
  session = null;
  sessionStorage.removeItem(SESSION);
  show();
}

function show() {
  const signedIn = session !== null;
  $('sign-in-view').hidden = signedIn;
  $('who').hidden = !signedIn;
  $('who-name').textContent = signedIn ? `Signed in as ${session.username}` : '';
  $('not-admin-view').hidden = !signedIn || session.role === 'admin';
  $('admin-view').hidden = !signedIn || session.role !== 'admin';
}

$('sign-in-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const username = $('username').value;
  const password = $('password').value;
  const signedIn = await api('POST', '/tokens', { body: { username, password } });
  if (!signedIn.ok) {
    announce(`Sign-in failed: ${problem(signedIn)}`);
    return;
  }
  session = { id: signedIn.data.id, token: signedIn.data.token, userId: signedIn.data.userId, username };
  const me = await api('GET', `/users/${session.userId}`);
  session.role = me.data?.role ?? 'member';
  session.username = me.data?.username ?? username;
  sessionStorage.setItem(SESSION, JSON.stringify(session));
  $('password').value = '';
  show();
  if (session.role === 'admin') {
    announce(`Signed in as ${session.username}.`);
    await loadReports();
  } else {
    announce('This page is for admins only.');
  }
});

$('sign-out').addEventListener('click', async () => {
  if (session) await api('DELETE', `/tokens/${session.id}`);
  forget();
  announce('Signed out; the token was revoked.');
  $('username').focus();
});

// ---- views --------------------------------------------------------------------------------------------------

function selectView(name) {
  for (const view of ['reports', 'people']) {
    $(`${view}-view`).hidden = view !== name;
    $(`tab-${view}`).setAttribute('aria-pressed', String(view === name));
  }
}
$('tab-reports').addEventListener('click', () => selectView('reports'));
$('tab-people').addEventListener('click', () => {
  selectView('people');
  $('people-query').focus();
});

// ---- the reports queue ---------------------------------------------------------------------------------------

let reportsNext;

async function loadReports(more = false) {
  const status = $('status-filter').value;
  const path = more ? reportsNext : `/reports?limit=20${status ? `&status=${status}` : ''}`;
  const page = await api('GET', path);
  if (!page.ok) {
    announce(`The reports could not be loaded: ${problem(page)}`);
    return;
  }
  if (!more) $('reports').replaceChildren();
  for (const report of page.data) $('reports').append(reportCard(report));
  reportsNext = page.next;
  $('more-reports').hidden = reportsNext === undefined;
  $('reports-empty').hidden = $('reports').children.length > 0;
}
$('status-filter').addEventListener('change', () => loadReports());
$('more-reports').addEventListener('click', () => loadReports(true));

function reportCard(report) {
  const card = el('li', { class: 'card', 'data-report': report.id });
  renderReportSummary(card, report);
  return card;
}

function renderReportSummary(card, report) {
  fill(
    card,
    el('h3', {}, `Report ${report.id}: ${report.reason} (${report.status})`),
    el('p', { class: 'meta' }, `${report.subject.type} ${report.subject.id}, reported ${new Date(report.createdAt).toLocaleString()}`),
    report.comment ? el('p', {}, report.comment) : undefined,
    el('button', { type: 'button', class: 'secondary', onclick: () => openReport(card, report.id) }, `Open report ${report.id}`),
  );
}

/** The user behind an id, as an admin sees them (suspended ones included), and whether they are suspended. */
async function person(id) {
  const [user, suspension] = await Promise.all([api('GET', `/users/${id}`), api('GET', `/users/${id}/suspension`)]);
  return { user: user.ok ? user.data : undefined, suspension: suspension.ok ? suspension.data : undefined };
}

const nameOf = (who, id) => (who.user ? `${who.user.username}${who.user.displayName ? ` (${who.user.displayName})` : ''}` : `user ${id} (deleted)`);

/** The reported thing as an admin sees it, with its author. */
async function subjectOf(subject, links) {
  if (subject.type === 'user') {
    const who = await person(subject.id);
    return { authorId: who.user ? subject.id : undefined, author: who, exists: who.user !== undefined };
  }
  const path = subject.type === 'post' ? `/posts/${subject.id}` : new URL(links.find((l) => l.rel === 'subject').href).pathname;
  const answer = await api('GET', path);
  if (!answer.ok) return { exists: false, path };
  const authorId = subject.type === 'post' ? answer.data.ownerId : answer.data.authorId;
  return { exists: true, path, item: answer.data, authorId, author: await person(authorId) };
}

async function openReport(card, id) {
  const answer = await api('GET', `/reports/${id}`);
  if (!answer.ok) {
    announce(`Report ${id} could not be loaded: ${problem(answer)}`);
    return;
  }
  const report = answer.data;
  const [reporter, subject] = await Promise.all([person(report.reporterId), subjectOf(report.subject, report.links)]);
  const result = el('p', { class: 'result', role: 'status', 'aria-live': 'polite' });
  const resolutionId = `resolution-${id}`;
  const reasonId = `suspend-reason-${id}`;
  const resolution = el('textarea', { id: resolutionId, maxlength: 1000 }, report.resolution);
  const suspendReason = el('input', { id: reasonId, maxlength: 1000, value: `Report ${id}: ${report.reason}` });

  /** Runs an action, shows its outcome, and reloads this report (the queue follows without a reload of the page). */
  const act = async (label, run) => {
    result.className = 'result';
    result.textContent = `${label}…`;
    const outcome = await run();
    if (outcome.ok) {
      await openReport(card, id);
      announce(`${label}: done.`);
      const shown = card.querySelector('.result');
      shown.className = 'result done';
      shown.textContent = `${label}: done.`;
      // A report whose status no longer matches the filter leaves the queue shown.
      if (outcome.movedTo && $('status-filter').value && $('status-filter').value !== outcome.movedTo) card.remove();
    } else if (outcome.status === 412) {
      await openReport(card, id);
      const shown = card.querySelector('.result');
      shown.className = 'result error';
      shown.textContent = 'This report was changed by someone else meanwhile. It has been reloaded: check it and try again.';
    } else {
      result.className = 'result error';
      result.textContent = `${label} failed: ${problem(outcome)}`;
    }
  };
  const decide = (status) =>
    act(status === 'open' ? 'Reopen' : status === 'resolved' ? 'Resolve' : 'Dismiss', async () => {
      const put = await api('PUT', `/reports/${id}`, { body: { status, resolution: resolution.value }, headers: { 'if-match': answer.etag } });
      return { ...put, movedTo: status };
    });

  const author = subject.author;
  const suspended = author?.suspension !== undefined;
  fill(
    card,
    el('h3', {}, `Report ${report.id}: ${report.reason} (${report.status})`),
    el('p', { class: 'meta' }, `By ${nameOf(reporter, report.reporterId)}, ${new Date(report.createdAt).toLocaleString()}`),
    report.comment ? el('p', {}, `“${report.comment}”`) : undefined,
    el(
      'div',
      { class: 'subject' },
      !subject.exists
        ? el('p', {}, `The reported ${report.subject.type} no longer exists.`)
        : report.subject.type === 'user'
          ? [el('p', {}, `User ${nameOf(author, subject.authorId)}`), author.user.bio ? el('p', {}, author.user.bio) : undefined]
          : [
              subject.item.title ? el('p', {}, el('strong', {}, subject.item.title)) : undefined,
              el('p', {}, subject.item.content),
              el('p', { class: 'meta' }, `${report.subject.type} by ${nameOf(author, subject.authorId)}`),
            ],
      suspended ? el('p', {}, el('span', { class: 'badge suspended' }, 'suspended'), ` ${author.suspension.reason}`) : undefined,
    ),
    report.status !== 'open' && report.resolution ? el('p', { class: 'meta' }, `Resolution: ${report.resolution}`) : undefined,
    el(
      'div',
      { class: 'actions' },
      el(
        'div',
        {},
        el('label', { for: resolutionId }, 'Resolution'),
        resolution,
        report.status === 'open'
          ? [
              el('button', { type: 'button', onclick: () => decide('resolved') }, 'Resolve'),
              el('button', { type: 'button', class: 'secondary', onclick: () => decide('dismissed') }, 'Dismiss'),
            ]
          : el('button', { type: 'button', class: 'secondary', onclick: () => decide('open') }, 'Reopen'),
      ),
      el(
        'div',
        {},
        subject.exists && report.subject.type !== 'user'
          ? el(
              'button',
              { type: 'button', class: 'danger', onclick: () => act(`Delete the ${report.subject.type}`, () => api('DELETE', subject.path)) },
              `Delete the ${report.subject.type}`,
            )
          : undefined,
        subject.authorId !== undefined && !suspended
          ? [
              el('label', { for: reasonId }, 'Suspension reason'),
              suspendReason,
              el(
                'button',
                {
                  type: 'button',
                  class: 'danger',
                  onclick: () => act('Suspend the author', () => api('PUT', `/users/${subject.authorId}/suspension`, { body: { reason: suspendReason.value } })),
                },
                'Suspend the author',
              ),
            ]
          : undefined,
        subject.authorId !== undefined && suspended
          ? el(
              'button',
              { type: 'button', class: 'secondary', onclick: () => act('Lift the suspension', () => api('DELETE', `/users/${subject.authorId}/suspension`)) },
              'Lift the suspension',
            )
          : undefined,
      ),
    ),
    result,
  );
}

// ---- people -------------------------------------------------------------------------------------------------

let peopleNext;

async function findPeople(more = false) {
  const query = $('people-query').value.trim();
  let page = await api('GET', more ? peopleNext : `/users?q=${encodeURIComponent(query)}`);
  // A name search (GET /users?q=) refuses a query with no word in it: look the name up exactly instead.
  if (!more && page.status === 400) page = await api('GET', `/users?username=${encodeURIComponent(query)}`);
  if (!page.ok) {
    announce(`The search failed: ${problem(page)}`);
    return;
  }
  if (!more) $('people').replaceChildren();
  for (const user of page.data) $('people').append(await personCard(user));
  peopleNext = page.next;
  $('more-people').hidden = peopleNext === undefined;
  $('people-empty').hidden = $('people').children.length > 0;
}
$('people-form').addEventListener('submit', (event) => {
  event.preventDefault();
  void findPeople();
});
$('more-people').addEventListener('click', () => findPeople(true));

async function personCard(user) {
  const card = el('li', { class: 'card', 'data-user': user.id });
  await renderPerson(card, user.id);
  return card;
}

async function renderPerson(card, id) {
  const who = await person(id);
  if (!who.user) {
    card.replaceChildren(el('p', {}, `User ${id} no longer exists.`));
    return;
  }
  const reasonId = `person-reason-${id}`;
  const reason = el('input', { id: reasonId, maxlength: 1000 });
  const result = el('p', { class: 'result', role: 'status', 'aria-live': 'polite' });
  const act = async (label, run) => {
    const outcome = await run();
    if (outcome.ok) {
      await renderPerson(card, id);
      announce(`${label}: done.`);
    } else {
      result.className = 'result error';
      result.textContent = `${label} failed: ${problem(outcome)}`;
    }
  };
  const controls = who.suspension
    ? [
        el('p', {}, `Suspended: ${who.suspension.reason}`),
        el('button', { type: 'button', class: 'secondary', onclick: () => act('Lift the suspension', () => api('DELETE', `/users/${id}/suspension`)) }, 'Lift the suspension'),
      ]
    : who.user.role === 'admin'
      ? []
      : [
          el('label', { for: reasonId }, 'Suspension reason'),
          reason,
          el('button', { type: 'button', class: 'danger', onclick: () => act('Suspend', () => api('PUT', `/users/${id}/suspension`, { body: { reason: reason.value } })) }, 'Suspend'),
        ];
  fill(
    card,
    el('h3', {}, nameOf(who, id), ' ', who.suspension ? el('span', { class: 'badge suspended' }, 'suspended') : undefined),
    el('p', { class: 'meta' }, `${who.user.role}, ${who.user.followerCount} followers, ${who.user.postCount} posts`),
    ...controls,
    result,
  );
}

// ---- start ----------------------------------------------------------------------------------------------------

show();
if (session?.role === 'admin') void loadReports();
