// Drives the xjob web console in headless Chromium (Playwright, browser given by path).
// Started by admin/tests/it/console_browser.rs, which runs a real admin and an executor with the
// handlers `echo`, `sleep`, `flaky` and `hold`, and passes:
//   XJOB_CONSOLE_URL     the console, e.g. http://127.0.0.1:8081
//   XJOB_CHROMIUM        the Chromium binary
//   XJOB_SCREENSHOTS     directory for one screenshot per page
//   XJOB_ADMIN_USER / XJOB_ADMIN_PASSWORD   an admin with a console password
//   XJOB_GROUP_ID        the executor group of that executor
//   XJOB_RELEASE_DIR     where a file named like a `hold` run's params ends that run
// The browser runs in Asia/Tokyo (UTC+9 all year), so its local zone differs from UTC.
// Each step prints one line; the first failure ends the run with exit code 1.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const base = need('XJOB_CONSOLE_URL');
const shots = need('XJOB_SCREENSHOTS');
const adminUser = need('XJOB_ADMIN_USER');
const adminPassword = need('XJOB_ADMIN_PASSWORD');
const groupId = need('XJOB_GROUP_ID');
const releaseDir = need('XJOB_RELEASE_DIR');
const workflowId = need('XJOB_WORKFLOW_ID');
const TIMEOUT = 30000;

function need(name) {
  const value = process.env[name];
  if (!value) { throw new Error(`${name} is not set`); }
  return value;
}

function check(condition, message) {
  if (!condition) { throw new Error(message); }
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

/// Goes to a page. A run's page reloads itself once when the watched run ends; a visit that
/// this reload interrupts is simply made again.
async function visit(page, url) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await page.goto(url);
    } catch (error) {
      if (attempt >= 2 || !/interrupted by another navigation/.test(error.message)) { throw error; }
      await page.waitForLoadState('load');
    }
  }
}

async function login(page, user, password) {
  await page.goto(`${base}/login`);
  await page.fill('#name', user);
  await page.fill('#password', password);
  await Promise.all([page.waitForNavigation(), page.click('#login')]);
}

async function logout(page) {
  await Promise.all([page.waitForNavigation(), page.click('#logout')]);
}

/// Creates a job through the editor; returns its id (from the URL it lands on).
async function createJob(page, fields) {
  await visit(page, `${base}/jobs/new`);
  await page.selectOption('#group_id', groupId);
  await page.fill('#name', fields.name);
  await page.fill('#author', 'console-test');
  await page.fill('#handler', fields.handler);
  await page.selectOption('#schedule_type', fields.scheduleType);
  await page.fill('#schedule_conf', fields.schedule);
  if (fields.retries) { await page.fill('#fail_retry_count', String(fields.retries)); }
  if (fields.glue) {
    await page.selectOption('#glue_type', fields.glue);
    await page.fill('#glue_source', fields.source);
  }
  await setFields(page, fields.more || {});
  await Promise.all([page.waitForNavigation(), page.click('#save-job')]);
  const match = /\/jobs\/(\d+)/.exec(page.url());
  check(match, `no job page after saving: ${page.url()}`);
  return Number(match[1]);
}

/// Fills form fields by id: a select gets the option of that value, any other field the text.
async function setFields(page, values) {
  for (const [id, value] of Object.entries(values)) {
    const tag = await page.$eval(`#${id}`, (element) => element.tagName);
    if (tag === 'SELECT') {
      await page.selectOption(`#${id}`, value);
    } else {
      await page.fill(`#${id}`, value);
    }
  }
}

/// Checks that each field (by id) shows the value expected.
async function expectFields(page, values, what) {
  for (const [id, value] of Object.entries(values)) {
    const shown = await page.inputValue(`#${id}`);
    check(shown === value, `${what}: #${id} shows ${JSON.stringify(shown)}, not ${JSON.stringify(value)}`);
  }
}

/// The cells of a backfill's row on its job's page (reloaded): id, state, range, started of
/// total, succeeded, failed, running.
async function backfillRow(page, job, id) {
  await visit(page, `${base}/jobs/${job}`);
  return page.$$eval(`#backfill-${id} td`, (cells) => cells.map((cell) => cell.textContent.trim()));
}

/// Posts a form from inside the page (as a forger would, with the page's cookies).
async function forgedPost(page, url, fields) {
  return page.evaluate(async ({ url, fields }) => {
    const response = await fetch(url, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    return { status: response.status, text: await response.text() };
  }, { url, fields });
}

/// Confirmation dialogs: every destructive button asks first. A step queues how the next one
/// is answered (accept when nothing is queued); the messages shown are kept for checks.
const dialogs = { answers: [], seen: [] };
function watchDialogs(page) {
  page.on('dialog', (dialog) => {
    dialogs.seen.push(dialog.message());
    const answer = dialogs.answers.shift() || 'accept';
    (answer === 'accept' ? dialog.accept() : dialog.dismiss()).catch(() => {});
  });
}

/// axe-core's findings of impact serious or critical on the page as it is now (axe-core from
/// console-tests/node_modules, evaluated in the page: the console's content-security policy
/// allows no inline script, and an evaluation from the driver is not one).
const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
async function axeFindings(page) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, {
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
  }));
  return result.violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${violation.id} (${violation.impact}, ${violation.nodes.length} nodes: `
      + `${violation.nodes.slice(0, 2).map((node) => node.target.join(' ')).join(', ')})`);
}

const steps = [];
function step(name, run) { steps.push({ name, run }); }

const state = {};

step('a wrong password is refused with a message', async (page) => {
  await login(page, adminUser, 'not-the-password');
  const error = await page.textContent('#login-error');
  check(/Wrong user name or password/.test(error), `login error: ${error}`);
  await shot(page, 'login');
});

step('the admin logs in and sees the dashboard', async (page) => {
  await login(page, adminUser, adminPassword);
  check(new URL(page.url()).pathname === '/', `after login: ${page.url()}`);
  await page.waitForSelector('#totals');
  check(!(await page.$('#open-banner')), 'no open-console banner once users exist');
});

step('a cron error shows inline, first as you type, then from the API on save', async (page) => {
  await page.goto(`${base}/jobs/new`);
  await page.selectOption('#group_id', groupId);
  await page.fill('#name', 'console cron');
  await page.fill('#handler', 'echo');
  await page.fill('#schedule_conf', '0 0 * * *');
  await page.waitForSelector('#err-schedule_conf:not([hidden])', { timeout: TIMEOUT });
  const live = await page.textContent('#err-schedule_conf');
  check(/6 or 7 fields/.test(live), `live cron error: ${live}`);
  await Promise.all([page.waitForNavigation(), page.click('#save-job')]);
  const saved = await page.textContent('#err-schedule_conf');
  check(/6 or 7 fields/.test(saved), `cron error after save: ${saved}`);
  await shot(page, 'job-editor-cron-error');
  await page.fill('#schedule_conf', '*/2 * * * * ?');
  await page.waitForFunction(
    () => document.querySelectorAll('#preview-times li').length === 5, null, { timeout: TIMEOUT });
  await shot(page, 'job-editor-preview');
  await Promise.all([page.waitForNavigation(), page.click('#save-job')]);
  const match = /\/jobs\/(\d+)/.exec(page.url());
  check(match, `saved job page: ${page.url()}`);
  state.cronJob = Number(match[1]);
});

step('the started cron job produces a SUCCESS run', async (page) => {
  await page.goto(`${base}/jobs/${state.cronJob}`);
  await Promise.all([page.waitForNavigation(), page.click('#start-job')]);
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    await page.goto(`${base}/runs?job=${state.cronJob}&status=SUCCESS`);
    if (await page.$('#runs .s-success')) { break; }
    check(Date.now() < deadline, 'no SUCCESS run of the started job within 30 s');
    await page.waitForTimeout(1000);
  }
  await shot(page, 'runs');
  await page.goto(`${base}/jobs/${state.cronJob}`);
  await Promise.all([page.waitForNavigation(), page.click('#stop-job')]);
  await page.goto(`${base}/jobs`);
  await page.waitForSelector(`tr[data-job-id="${state.cronJob}"]`);
  await shot(page, 'jobs');
});

step('a trigger with params shows them in the live log', async (page) => {
  const marker = `hello-from-console-${Date.now()}`;
  await visit(page, `${base}/jobs/${state.cronJob}`);
  await page.fill('#trigger_params', marker);
  await Promise.all([page.waitForNavigation(), page.click('#trigger-job')]);
  check(/\/runs\/\d+/.test(page.url()), `trigger lands on the run: ${page.url()}`);
  await page.waitForFunction(
    (text) => document.getElementById('run-log').textContent.includes(text), marker,
    { timeout: TIMEOUT });
  // The run ends while watched: the page reloads once with its final fields.
  await page.waitForFunction(
    () => document.getElementById('run-status').textContent.trim() === 'SUCCESS', null,
    { timeout: TIMEOUT });
  await page.waitForLoadState('load');
  const params = await page.textContent('#run-params');
  check(params.includes(marker), `run params: ${params}`);
  await shot(page, 'run-detail');
});

step('a long run is killed from its page', async (page) => {
  state.sleepJob = await createJob(page, {
    name: 'console sleeper', handler: 'sleep', scheduleType: 'NONE', schedule: '',
  });
  await page.fill('#trigger_params', 'long');
  await Promise.all([page.waitForNavigation(), page.click('#trigger-job')]);
  await page.waitForFunction(
    () => document.getElementById('run-log').textContent.includes('sleeping'), null,
    { timeout: TIMEOUT });
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#kill-run')]);
  await page.waitForFunction(
    () => document.getElementById('run-status').textContent.trim() === 'KILLED', null,
    { timeout: TIMEOUT });
  state.killedRun = Number(/\/runs\/(\d+)/.exec(page.url())[1]);
  await shot(page, 'run-killed');
});

step('a failed run and its retry show as the attempts of one fire', async (page) => {
  const job = await createJob(page, {
    name: 'console flaky', handler: 'flaky', scheduleType: 'NONE', schedule: '', retries: 1,
  });
  await Promise.all([page.waitForNavigation(), page.click('#trigger-job')]);
  const runUrl = page.url();
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    await visit(page, runUrl);
    const rows = await page.$$('#attempts tr[data-run-id]');
    if (rows.length === 2 && await page.$('#attempts .s-success') && await page.$('#attempts .s-failed')) {
      break;
    }
    check(Date.now() < deadline, `no failed attempt and successful retry of job ${job} within 30 s`);
    await page.waitForTimeout(1000);
  }
  await shot(page, 'run-attempts');
});

step('a script job keeps the versions of its source', async (page) => {
  const job = await createJob(page, {
    name: 'console script', handler: '', scheduleType: 'NONE', schedule: '', glue: 'SHELL',
    source: 'echo "first version"',
  });
  await page.fill('#glue_source', 'echo "first version, edited"');
  await Promise.all([page.waitForNavigation(), page.click('#save-glue')]);
  const missing = await page.textContent('#err-glue_remark');
  check(/required/.test(missing), `a save without a remark names the field: ${missing}`);
  await page.fill('#glue_source', 'echo "second version"');
  await page.fill('#glue_remark', 'say second');
  await Promise.all([page.waitForNavigation(), page.click('#save-glue')]);
  const rows = await page.$$('#glue-versions tr td:first-child');
  check(rows.length >= 1, `job ${job}: saved versions listed (${rows.length})`);
  const source = await page.inputValue('#glue_source');
  check(source.includes('second version'), `the saved source is shown: ${source}`);
  state.scriptJob = job;
  // Loading an older version shows what it changes against the saved source.
  await page.fill('#glue_source', 'echo "third version"');
  await page.fill('#glue_remark', 'say third');
  await Promise.all([page.waitForNavigation(), page.click('#save-glue')]);
  const loads = await page.$$('#glue-versions a');
  check(loads.length >= 2, `two versions to compare (${loads.length})`);
  await Promise.all([page.waitForNavigation(), loads[loads.length - 1].click()]);
  await page.waitForSelector('#glue-diff');
  check(await page.$('#glue-diff .add') && await page.$('#glue-diff .del'),
    `the diff marks added and removed lines: ${await page.textContent('#glue-diff')}`);
  await shot(page, 'job-script');
});

step('the script editor numbers lines and highlights the script', async (page) => {
  await visit(page, `${base}/jobs/${state.scriptJob}`);
  await page.waitForSelector('.code-editor[data-lang=shell]');
  await page.fill('#glue_source', 'if true; then\n  echo $HOME "done" # a comment\nfi\n');
  const numbers = await page.textContent('.code-editor .code-gutter');
  check(/^1\n2\n3\n4\b/.test(numbers), `line numbers 1 to 4: ${JSON.stringify(numbers)}`);
  const kinds = { kw: 'if', var: '$HOME', str: '"done"', com: '# a comment' };
  for (const [kind, text] of Object.entries(kinds)) {
    const shown = await page.$$eval(`.code-shown .tok-${kind}`, (spans) => spans.map((span) => span.textContent));
    check(shown.includes(text), `${text} is highlighted as ${kind}: ${JSON.stringify(shown)}`);
  }
  // The text area is still the form's field, posted as typed.
  check((await page.inputValue('#glue_source')).includes('# a comment'), 'the field keeps the text');
  await shot(page, 'script-editor');
  // A new job's editor follows the glue type chosen in the form.
  await visit(page, `${base}/jobs/new`);
  await page.selectOption('#glue_type', 'PYTHON');
  await page.fill('#glue_source', 'def main():\n    print("hi")\n');
  await page.waitForSelector('.code-editor[data-lang=python] .code-shown .tok-kw');
});

step('a multi-line shell script saved from the editor runs and succeeds', async (page) => {
  // The browser posts the text area with CRLF line ends; the admin stores LF, so bash can
  // read the `if` block (with CR left in, it fails: unexpected end of file).
  const job = await createJob(page, {
    name: 'console multi-line script', handler: '', scheduleType: 'NONE', schedule: '',
    glue: 'SHELL', source: 'if true; then\n  echo "multi-line script ran"\nfi\n',
  });
  await Promise.all([page.waitForNavigation(), page.click('#trigger-job')]);
  check(/\/runs\/\d+/.test(page.url()), `trigger lands on the run: ${page.url()}`);
  await page.waitForFunction(
    () => /SUCCESS|FAILED/.test(document.getElementById('run-status').textContent), null,
    { timeout: TIMEOUT });
  await page.waitForLoadState('load');
  const status = (await page.textContent('#run-status')).trim();
  check(status === 'SUCCESS', `job ${job}: the script's run ends ${status}`);
});

step('errors stay under their field: time zone, trigger address, bad numbers', async (page) => {
  await visit(page, `${base}/jobs/new`);
  await page.fill('#time_zone', 'Mars/Base');
  await page.waitForSelector('#err-time_zone:not([hidden])', { timeout: TIMEOUT });
  check(await page.isHidden('#err-schedule_conf'), 'the zone error is not under Schedule');
  await page.fill('#time_zone', '');
  await page.selectOption('#group_id', groupId);
  await page.fill('#name', 'console bad numbers');
  await page.fill('#handler', 'echo');
  await page.fill('#timeout_ms', '30x');
  await Promise.all([page.waitForNavigation(), page.click('#save-job')]);
  const timeout = await page.textContent('#err-timeout_ms');
  check(/not a duration/.test(timeout), `a bad timeout is refused under its field: ${timeout}`);
  await visit(page, `${base}/jobs/${state.cronJob}`);
  await page.fill('#trigger_addresses', 'http://127.0.0.1:9');
  await Promise.all([page.waitForNavigation(), page.click('#trigger-job')]);
  const address = await page.textContent('#err-addresses');
  check(/is not an address of group/.test(address), `foreign address under its field: ${address}`);
});

step('Start and Stop from the list ask first and come back to the same filtered list', async (page) => {
  const filtered = `${base}/jobs?name=${encodeURIComponent('console cron')}`;
  await visit(page, filtered);
  const seen = dialogs.seen.length;
  dialogs.answers.push('dismiss');
  await page.click(`#start-${state.cronJob}`);
  check(dialogs.seen.length === seen + 1, 'Start asks before it starts');
  check(/Start job \d+ \(console cron\)\?/.test(dialogs.seen[seen]), `asked: ${dialogs.seen[seen]}`);
  check(await page.$(`#start-${state.cronJob}`), 'dismissing keeps the job stopped');
  for (const [action, done] of [['start', 'started'], ['stop', 'stopped']]) {
    dialogs.answers.push('accept');
    await Promise.all([page.waitForNavigation(), page.click(`#${action}-${state.cronJob}`)]);
    const url = new URL(page.url());
    check(url.pathname === '/jobs' && url.searchParams.get('name') === 'console cron',
      `${action}: back on the filtered list, not the job: ${page.url()}`);
    const notice = await page.textContent('.notice.ok');
    check(new RegExp(`Job ${state.cronJob} ${done}`).test(notice), `${action} notice: ${notice}`);
  }
  check(await page.$(`#start-${state.cronJob}`), 'stopped again');
});

step('Retry and Kill from the runs list ask first and keep the list', async (page) => {
  const list = `${base}/runs?job=${state.sleepJob}`;
  await visit(page, list);
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click(`#retry-run-${state.killedRun}`)]);
  check(page.url().startsWith(list), `Retry comes back to the list: ${page.url()}`);
  const retried = await page.textContent('.notice.ok');
  const match = /Run \d+ retried as run (\d+)/.exec(retried);
  check(match, `retry notice: ${retried}`);
  const run = Number(match[1]);
  const deadline = Date.now() + TIMEOUT;
  while (!(await page.$(`#kill-run-${run}`))) {
    check(Date.now() < deadline, `run ${run} offers no Kill in the list within 30 s`);
    await page.waitForTimeout(500);
    await visit(page, list);
  }
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click(`#kill-run-${run}`)]);
  check(page.url().startsWith(list), `Kill comes back to the list: ${page.url()}`);
  check(/Kill sent/.test(await page.textContent('.notice.ok')), 'kill notice');
  for (;;) {
    const status = await page.textContent(`tr[data-run-id="${run}"] .badge`);
    if (status.trim() === 'KILLED') { break; }
    check(Date.now() < deadline, `run ${run} is ${status}, not KILLED, within 30 s`);
    await page.waitForTimeout(500);
    await visit(page, list);
  }
  await shot(page, 'runs-actions');
  // Runs show their job's name, and the list filters by (part of) a job name.
  await visit(page, `${base}/runs?job_name=${encodeURIComponent('console sleeper')}`);
  const jobs = await page.$$eval('#runs tr[data-run-id] td:nth-child(2)', (cells) =>
    cells.map((cell) => cell.textContent));
  check(jobs.length >= 2 && jobs.every((text) => text.includes(`console sleeper (${state.sleepJob})`)),
    `runs of the named job only, with its name: ${jobs.join(' | ')}`);
  await visit(page, `${base}/runs?job_name=console`);
  const several = await page.textContent('#filter-error');
  check(/matches several jobs/.test(several), `an ambiguous name is refused: ${several}`);
});

step('ticked jobs are started and stopped together', async (page) => {
  await visit(page, `${base}/jobs?name=${encodeURIComponent('console cron')}`);
  await page.check(`#select-${state.cronJob}`);
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#bulk-start')]);
  const started = await page.textContent('.notice.ok');
  check(new RegExp(`Jobs started: ${state.cronJob}\\.`).test(started), `bulk start: ${started}`);
  check(await page.$(`#stop-${state.cronJob}`), 'the ticked job runs');
  check(new URL(page.url()).searchParams.get('name') === 'console cron', 'same list');
  await page.check(`#select-${state.cronJob}`);
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#bulk-stop')]);
  const stopped = await page.textContent('.notice.ok');
  check(new RegExp(`Jobs stopped: ${state.cronJob}\\.`).test(stopped), `bulk stop: ${stopped}`);
  check(await page.$(`#start-${state.cronJob}`), 'the ticked job is stopped');
  await shot(page, 'jobs-bulk');
});

/// The `datetime-local` value of instant `ms` on a wall clock `offsetHours` ahead of UTC.
function wallClock(ms, offsetHours) {
  return new Date(ms + offsetHours * 3600000).toISOString().slice(0, 16);
}

/// Picks a zone in the header; on the runs list this loads the list again in that zone.
async function pickZone(page, value) {
  if (await page.$('#filter-zone')) {
    await Promise.all([page.waitForNavigation(), page.selectOption('#tz-pick', value)]);
  } else {
    await page.selectOption('#tz-pick', value);
  }
}

step('times show their zone, picked in the header; the runs filter reads that zone', async (page) => {
  const list = `${base}/runs?job=${state.cronJob}`;
  await visit(page, list);
  const first = 'tr[data-run-id] time[data-ms]';
  const utc = await page.textContent(first);
  check(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/.test(utc), `UTC unless picked: ${utc}`);
  check((await page.textContent('#filter-zone')).includes('UTC'), 'the filter says UTC');
  await pickZone(page, 'local');
  const local = await page.textContent(first);
  check(/ GMT\+9$/.test(local), `the browser's zone (Tokyo) when picked: ${local}`);
  check((await page.textContent('#filter-zone')).includes('Asia/Tokyo'), 'the filter says Tokyo');
  // The newest run, from a minute before it on Tokyo's clock: listed.
  const run = await page.getAttribute('tr[data-run-id]', 'data-run-id');
  const at = Number(await page.getAttribute(first, 'data-ms'));
  const from = wallClock(at - 60000, 9);
  await page.fill('input[name=from]', from);
  await Promise.all([page.waitForNavigation(), page.click('#run-filters button[type=submit]')]);
  check(new URL(page.url()).searchParams.get('tz') === 'Asia/Tokyo', `the filter carries its zone: ${page.url()}`);
  check(await page.$(`tr[data-run-id="${run}"]`), `run ${run} is listed from ${from} Tokyo time`);
  await shot(page, 'runs-zone');
  // The same typed time in UTC is 9 hours later: the run is not listed.
  await pickZone(page, 'utc');
  check((await page.inputValue('input[name=from]')) === from, 'the typed time stays');
  check((await page.textContent('#filter-zone')).includes('UTC'), 'now read in UTC');
  check(!(await page.$(`tr[data-run-id="${run}"]`)), `run ${run} is not after ${from} UTC`);
  // The schedule preview names its zone: the job's own under "job's zone", else the one picked.
  await visit(page, `${base}/jobs/${state.cronJob}`);
  await page.waitForSelector('#preview-times li');
  check(/Next fires \(UTC\)/.test(await page.textContent('#preview')), 'preview in UTC');
  await page.selectOption('#tz-pick', 'local');
  await page.waitForFunction(() => /Next fires \(Asia\/Tokyo\)/.test(
    document.getElementById('preview').textContent), null, { timeout: TIMEOUT });
  await page.selectOption('#tz-pick', 'job');
  await page.fill('#time_zone', 'America/New_York');
  await page.waitForFunction(() => /Next fires \(America\/New_York\)/.test(
    document.getElementById('preview').textContent), null, { timeout: TIMEOUT });
  const fire = await page.textContent('#preview-times li');
  check(/ (EST|EDT)$/.test(fire), `a fire in the job's zone: ${fire}`);
  await page.selectOption('#tz-pick', 'utc');
});

step('a RUNNING row turns SUCCESS without a reload', async (page) => {
  state.holdJob = await createJob(page, {
    name: 'console hold', handler: 'hold', scheduleType: 'NONE', schedule: '',
  });
  await visit(page, `${base}/runs?job=${state.holdJob}`);
  check((await page.textContent('#live-toggle')) === 'Live updates: on', 'live by default');
  // Marks this page: a reload would lose the mark.
  await page.evaluate(() => { window.xjobSamePage = true; });
  const csrf = await page.getAttribute('input[name=csrf]', 'value');
  const name = `release-${Date.now()}`;
  const answer = await forgedPost(page, `/jobs/${state.holdJob}/trigger`, { csrf, params: name });
  check(answer.status === 200, `trigger: HTTP ${answer.status}`);
  const badge = 'tr[data-run-id] .badge';
  await page.waitForFunction((selector) => {
    const shown = document.querySelector(selector);
    return shown && shown.textContent === 'RUNNING';
  }, badge, { timeout: TIMEOUT });
  await shot(page, 'runs-live-running');
  fs.writeFileSync(path.join(releaseDir, name), 'released');
  await page.waitForFunction((selector) => {
    const shown = document.querySelector(selector);
    return shown && shown.textContent === 'SUCCESS';
  }, badge, { timeout: TIMEOUT });
  check(await page.evaluate(() => window.xjobSamePage === true), 'the page was not reloaded');
  // Off: the list stays as it is, and says so.
  await page.click('#live-toggle');
  check((await page.textContent('#live-toggle')) === 'Live updates: off', 'turned off');
  check((await page.textContent('#live-note')) === 'paused', 'paused');
  await page.click('#live-toggle');
  // The dashboard is live too, its failed-today tile and failing-jobs card from one read.
  await visit(page, `${base}/`);
  await page.waitForSelector('#dashboard-live');
  check(await page.$('#live-toggle'), 'the dashboard has the live toggle');
});

step('a calendar: a bad zone is refused under its field, then created and edited', async (page) => {
  await visit(page, `${base}/calendars`);
  await Promise.all([page.waitForNavigation(), page.click('#new-calendar')]);
  await setFields(page, {
    name: 'console-freeze', time_zone: 'Mars/Base', rules: '2030-12-25\nweekly sat,sun',
    description: 'change freeze',
  });
  await Promise.all([page.waitForNavigation(), page.click('#save-calendar')]);
  const zoneError = await page.textContent('#err-time_zone');
  check(/Mars\/Base/.test(zoneError), `the zone refusal is under its field: ${zoneError}`);
  await expectFields(page, { name: 'console-freeze', description: 'change freeze' },
    'the refused form keeps what was typed');
  await page.fill('#time_zone', 'Europe/Berlin');
  await Promise.all([page.waitForNavigation(), page.click('#save-calendar')]);
  check(/Calendar created/.test(await page.textContent('.notice.ok')), 'created notice');
  const card = await page.textContent('#calendar-console-freeze');
  check(/Europe\/Berlin/.test(card) && /weekly sat,sun/.test(card) && /change freeze/.test(card),
    `the calendar is listed with its zone, rules and description: ${card}`);
  await Promise.all([
    page.waitForNavigation(), page.click('#calendar-console-freeze a[href="/calendars/console-freeze"]'),
  ]);
  check(await page.getAttribute('#name', 'readonly') !== null, 'a saved calendar keeps its name');
  await expectFields(page, {
    time_zone: 'Europe/Berlin', rules: '2030-12-25\nweekly sat,sun', description: 'change freeze',
  }, 'the editor shows the saved calendar');
  await page.fill('#rules', '2030-12-24..2030-12-31\nweekly sat,sun');
  await Promise.all([page.waitForNavigation(), page.click('#save-calendar')]);
  check(/Calendar saved/.test(await page.textContent('.notice.ok')), 'saved notice');
  const edited = await page.textContent('#calendar-console-freeze');
  check(/2030-12-24\.\.2030-12-31/.test(edited) && !/2030-12-25/.test(edited),
    `the edited rules are listed: ${edited}`);
  await shot(page, 'calendars');
});

step('the job form saves jitter, catch-up, calendar, DST and overlap, and shows them back', async (page) => {
  const policies = {
    jitter_max_ms: '30s', catch_up_window_ms: '2h', catch_up_mode: 'ALL',
    calendar: 'console-freeze', calendar_mode: 'SKIP', dst_gap_policy: 'SKIP',
    dst_overlap_policy: 'BOTH', overlap_policy: 'BUFFER_ONE',
  };
  state.policyJob = await createJob(page, {
    name: 'console policies', handler: 'echo', scheduleType: 'CRON', schedule: '0 30 2 * * ?',
    more: { time_zone: 'Europe/Berlin', ...policies },
  });
  await visit(page, `${base}/jobs/${state.policyJob}`);
  await expectFields(page, policies, 'the saved job');
  // Changed on the saved job: every field takes its other values too.
  const changed = {
    jitter_max_ms: '1500ms', catch_up_window_ms: '45m', catch_up_mode: 'LATEST',
    calendar_mode: 'ONLY', dst_gap_policy: 'NEXT_VALID_TIME', dst_overlap_policy: 'SECOND',
    overlap_policy: 'CANCEL_OTHER',
  };
  await setFields(page, changed);
  await Promise.all([page.waitForNavigation(), page.click('#save-job')]);
  await visit(page, `${base}/jobs/${state.policyJob}`);
  await expectFields(page, { ...changed, calendar: 'console-freeze' }, 'the updated job');
  await shot(page, 'job-policies');
  // A calendar that does not exist is refused under its field, the rest kept as typed.
  await setFields(page, { calendar: 'no-such-calendar', overlap_policy: 'SKIP' });
  await Promise.all([page.waitForNavigation(), page.click('#save-job')]);
  const error = await page.textContent('#err-calendar');
  check(/no-such-calendar/.test(error) && /not found/.test(error), `calendar error: ${error}`);
  await expectFields(page, { overlap_policy: 'SKIP', jitter_max_ms: '1500ms' },
    'the refused form keeps what was typed');
});

step('a calendar a job uses is not deleted; once unused it is', async (page) => {
  await visit(page, `${base}/calendars/console-freeze`);
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#delete-calendar button')]);
  const refusal = await page.textContent('#error');
  check(new RegExp(`used by 1 job\\(s\\) \\(${state.policyJob}\\)`).test(refusal),
    `the refusal names the job: ${refusal}`);
  await shot(page, 'calendar-in-use');
  await visit(page, `${base}/calendars`);
  check(await page.$('#calendar-console-freeze'), 'the calendar is still there');
  // The job lets go of it; then the delete goes through.
  await visit(page, `${base}/jobs/${state.policyJob}`);
  await page.fill('#calendar', '');
  await Promise.all([page.waitForNavigation(), page.click('#save-job')]);
  await visit(page, `${base}/calendars/console-freeze`);
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#delete-calendar button')]);
  const notice = await page.textContent('.notice.ok');
  check(/Calendar console-freeze deleted/.test(notice), `deleted notice: ${notice}`);
  check(!(await page.$('#calendar-console-freeze')), 'the calendar is gone from the list');
});

step('a workflow run is started, followed live, retried and skipped from its page', async (page) => {
  await visit(page, `${base}/workflows/${workflowId}`);
  check(/has not run yet/.test(await page.textContent('#latest-run')), 'no run yet');
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#start-workflow')]);
  const started = await page.textContent('.notice.ok');
  check(/Started run \d+/.test(started), `start notice: ${started}`);
  // h holds: the run is RUNNING, the region live, Cancel offered.
  await page.waitForSelector('#workflow-live[data-live] #node-h[data-state="RUNNING"]',
    { timeout: TIMEOUT });
  check(await page.$('#cancel-workflow-run'), 'a running run can be cancelled');
  await shot(page, 'workflow-running');
  // Released, h succeeds and f fails: the page shows it without a reload.
  fs.writeFileSync(path.join(releaseDir, 'workflow-hold'), 'released');
  await page.waitForSelector('#node-f[data-state="FAILED"]', { timeout: TIMEOUT });
  await page.waitForSelector('#retry-f', { timeout: TIMEOUT });
  check(!(await page.$('#cancel-workflow-run')), 'no cancel once the run failed');
  check(!(await page.$('#retry-e')), 'e was skipped below f: no retry for it');
  const firstRun = await page.textContent('#workflow-node-f a');
  // Retry f: a new run of its job, which fails again (its handler fails first attempts).
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#retry-f')]);
  check(/Node f retried/.test(await page.textContent('.notice.ok')), 'retry notice');
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    await visit(page, `${base}/workflows/${workflowId}`);
    const run = await page.textContent('#workflow-node-f td:nth-child(4)');
    const failed = await page.$('#node-f[data-state="FAILED"]');
    if (failed && run !== firstRun && await page.$('#skip-f')) { break; }
    check(Date.now() < deadline, `f was not retried: ${run} (first ${firstRun})`);
    await page.waitForTimeout(500);
  }
  // Skip f: e runs, the run succeeds, f names who skipped it.
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#skip-f')]);
  check(/Node f skipped/.test(await page.textContent('.notice.ok')), 'skip notice');
  for (;;) {
    await visit(page, `${base}/workflows/${workflowId}`);
    if (/SUCCEEDED/.test(await page.textContent('#latest-run'))) { break; }
    check(Date.now() < deadline + TIMEOUT, 'the run did not succeed after the skip');
    await page.waitForTimeout(500);
  }
  check(await page.$('#node-e[data-state="SUCCEEDED"]'), 'e ran after f was skipped');
  const skippedBy = await page.textContent('#workflow-node-f');
  check(new RegExp(`by ${adminUser}`).test(skippedBy), `who skipped f: ${skippedBy}`);
  check(!(await page.$('#workflow-live[data-live]')), 'a finished run is not refreshed');
  await shot(page, 'workflow-skipped');
});

step('a backfill starts from the job page, shows its progress and is cancelled', async (page) => {
  const release = `backfill-${Date.now()}`;
  state.backfillJob = await createJob(page, {
    name: 'console backfill', handler: 'hold', scheduleType: 'CRON', schedule: '0 0 * * * ?',
    more: { params: release },
  });
  const job = state.backfillJob;
  check(/No backfills yet/.test(await page.textContent('#backfills')), 'no backfill yet');
  // A reversed range is refused, naming the times as typed.
  await setFields(page, { backfill_from: '2026-01-02T00:00', backfill_to: '2026-01-01T00:00' });
  await Promise.all([page.waitForNavigation(), page.click('#start-backfill')]);
  const reversed = await page.textContent('#error');
  check(/2026-01-02 00:00 is after To 2026-01-01 00:00/.test(reversed), `reversed: ${reversed}`);
  // Ten hourly occurrences, one at a time: the first holds until released.
  await visit(page, `${base}/jobs/${job}`);
  await setFields(page, {
    backfill_from: '2026-01-01T00:00', backfill_to: '2026-01-01T09:00', backfill_concurrency: '1',
  });
  await Promise.all([page.waitForNavigation(), page.click('#start-backfill')]);
  const started = /Backfill (\d+) started: 10 occurrences/.exec(await page.textContent('.notice.ok'));
  check(started, `started notice: ${await page.textContent('.notice.ok')}`);
  const id = Number(started[1]);
  // Progress: the first run started and running (held), the other nine not yet.
  const deadline = Date.now() + TIMEOUT;
  let cells;
  for (;;) {
    cells = await backfillRow(page, job, id);
    if (cells[1] === 'RUNNING' && cells[3] === '1/10' && cells[6] === '1') { break; }
    check(Date.now() < deadline, `no running first occurrence within 30 s: ${cells}`);
    await page.waitForTimeout(500);
  }
  await shot(page, 'job-backfill-running');
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click(`#cancel-backfill-${id}`)]);
  const cancelled = await page.textContent('.notice.ok');
  check(new RegExp(`Backfill ${id} cancelled`).test(cancelled), `cancel notice: ${cancelled}`);
  check(!(await page.$(`#cancel-backfill-${id}`)), 'no cancel button once cancelled');
  // The started run finishes on its own once released; no other run starts.
  fs.writeFileSync(path.join(releaseDir, release), 'released');
  for (;;) {
    cells = await backfillRow(page, job, id);
    if (cells[4] === '1') { break; }
    check(Date.now() < deadline + TIMEOUT, `the started run did not succeed: ${cells}`);
    await page.waitForTimeout(500);
  }
  check(cells[1] === 'CANCELLED' && cells[3] === '1/10' && cells[6] === '0',
    `cancelled after one of ten: ${cells}`);
  await shot(page, 'job-backfill-cancelled');
});

step('every page fits a phone', async (page) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${base}/`);
  await page.waitForSelector('#totals');
  const overflow = () => page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  check(await overflow() <= 0, `no sideways scrolling on a phone (${await overflow()} px)`);
  await shot(page, 'phone-dashboard');
  const wide = [];
  for (const url of ['/jobs', '/jobs/new', `/jobs/${state.cronJob}`, `/jobs/${state.backfillJob}`,
    '/runs', `/runs/${state.killedRun}`, '/executors', '/calendars', '/calendars/new', '/users',
    '/audit', '/account']) {
    await visit(page, `${base}${url}`);
    const extra = await overflow();
    if (extra > 0) { wide.push(`${url}: ${extra} px`); }
  }
  check(wide.length === 0, `pages wider than a phone:\n  ${wide.join('\n  ')}`);
  await page.setViewportSize({ width: 1280, height: 900 });
});

step('a post without the CSRF token is refused', async (page) => {
  await visit(page, `${base}/jobs`);
  const answer = await forgedPost(page, `/jobs/${state.cronJob}/start`, {});
  check(answer.status === 403, `post without CSRF: HTTP ${answer.status}`);
  check(/CSRF/.test(answer.text), 'the refusal names the CSRF token');
  const wrong = await forgedPost(page, `/jobs/${state.cronJob}/start`, { csrf: 'x'.repeat(64) });
  check(wrong.status === 403, `post with a wrong CSRF token: HTTP ${wrong.status}`);
});

step('clear logs asks first, then deletes finished runs', async (page) => {
  await visit(page, `${base}/runs?job=${state.sleepJob}`);
  await page.click('#clear-logs summary');
  await page.selectOption('#clear-form select[name=group]', groupId);
  await page.fill('#clear_job', String(state.sleepJob));
  await page.selectOption('#mode', 'ALL');
  await shot(page, 'clear-logs');
  dialogs.answers.push('dismiss');
  await page.click('#clear-logs-button');
  check(new URL(page.url()).pathname === '/runs', 'dismissing the confirmation stays');
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), page.click('#clear-logs-button')]);
  const notice = await page.textContent('.notice.ok');
  check(/^[1-9]\d* finished runs deleted/.test(notice), `clear notice: ${notice}`);
  await page.goto(`${base}/runs?job=${state.sleepJob}`);
  check(await page.$('#no-runs'), 'the killed run is gone');
});

step('executors, groups, users and audit pages render; a viewer is created', async (page) => {
  await page.goto(`${base}/executors`);
  await page.waitForSelector('table.executors');
  await shot(page, 'executors');
  await page.goto(`${base}/groups/${groupId}`);
  await page.waitForSelector('#group-form');
  await shot(page, 'group-editor');
  await page.goto(`${base}/users`);
  await page.fill('#user-form #name', 'victor');
  await page.selectOption('#user-form #role', 'viewer');
  await page.fill('#user-form #password', 'viewer-password-1');
  await Promise.all([page.waitForNavigation(), page.click('#create-user')]);
  const created = await page.textContent('.notice.ok');
  check(/User victor created/.test(created), `user notice: ${created}`);
  const row = page.locator('#users tr', { hasText: 'victor' });
  await row.locator('select[name=group]').selectOption(groupId);
  await Promise.all([page.waitForNavigation(), row.locator('button', { hasText: 'Grant' }).click()]);
  await shot(page, 'users');
  await visit(page, `${base}/users`);
  await Promise.all([
    page.waitForNavigation(),
    page.locator('#users tr', { hasText: 'victor' }).locator('a', { hasText: 'tokens' }).click(),
  ]);
  await page.fill('#description', 'ci');
  await Promise.all([page.waitForNavigation(), page.click('#create-token')]);
  const issued = await page.textContent('.notice.ok');
  check(/xjob_[0-9a-f]{64}/.test(issued), `a new token is shown once: ${issued}`);
  const open = await page.$$('#tokens button.danger');
  check(open.length === 2, `victor has two live tokens (${open.length})`);
  dialogs.answers.push('accept');
  await Promise.all([page.waitForNavigation(), open[0].click()]);
  check((await page.$$('#tokens button.danger')).length === 1, 'one token revoked');
  await shot(page, 'tokens');
  await page.goto(`${base}/audit`);
  await page.waitForSelector('#audit');
  await shot(page, 'audit');
  // The daily report (refreshed every second in this test) now has the runs above.
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    await page.goto(`${base}/`);
    if (await page.$('#runs-per-day rect.ok') && await page.$('#failing-jobs table')) { break; }
    check(Date.now() < deadline, 'the dashboard shows no succeeded run per day within 30 s');
    await page.waitForTimeout(1000);
  }
  await shot(page, 'dashboard');
  await logout(page);
});

step('the language switch shows the console in Chinese and remembers it', async (page) => {
  await login(page, adminUser, adminPassword);
  await visit(page, `${base}/users`);
  await Promise.all([page.waitForNavigation(), page.click('#lang-zh')]);
  check(new URL(page.url()).pathname === '/users', `back on the same page: ${page.url()}`);
  check(await page.getAttribute('html', 'lang') === 'zh-Hans', 'the page says it is Chinese');
  const nav = await page.textContent('header nav');
  check(/任务/.test(nav) && /运行记录/.test(nav), `the navigation in Chinese: ${nav}`);
  check((await page.textContent('h1')).trim() === '用户', 'the heading in Chinese');
  const findings = await axeFindings(page);
  check(findings.length === 0, `axe findings in Chinese:\n  ${findings.join('\n  ')}`);
  await shot(page, 'users-zh');
  // Remembered on the next pages (a cookie), until switched back.
  await visit(page, `${base}/account`);
  check(await page.getAttribute('html', 'lang') === 'zh-Hans', 'still Chinese on another page');
  // The dashboard and the runs pages, and the scripts' own words, in Chinese too.
  await visit(page, `${base}/`);
  const tiles = await page.textContent('#totals');
  check(/今日运行/.test(tiles) && /今日失败/.test(tiles), `the tiles in Chinese: ${tiles}`);
  check((await page.textContent('#runs-per-day h2')).trim() === '每日运行', 'chart title');
  check(/自动刷新/.test(await page.textContent('#live-toggle')), 'the live switch in Chinese');
  check((await axeFindings(page)).length === 0, 'axe findings on the Chinese dashboard');
  await shot(page, 'dashboard-zh');
  await visit(page, `${base}/runs`);
  check((await page.textContent('h1')).trim() === '运行记录', 'the runs heading in Chinese');
  check(/共 [\d,]+ 条运行记录/.test(await page.textContent('#runs-total')), 'the runs total');
  const header = await page.textContent('#runs tr');
  check(/触发时间/.test(header) && /操作/.test(header), `the runs columns in Chinese: ${header}`);
  check(/筛选/.test(await page.textContent('#run-filters')), 'the runs filter in Chinese');
  const confirmations = await page.$$eval('#runs form[data-confirm]',
    (forms) => forms.map((form) => form.getAttribute('data-confirm')));
  check(confirmations.every((text) => /[？]$/.test(text)), `confirmations: ${confirmations}`);
  check((await axeFindings(page)).length === 0, 'axe findings on the Chinese runs list');
  await shot(page, 'runs-zh');
  const firstRun = await page.getAttribute('#runs tr[data-run-id]', 'data-run-id');
  await visit(page, `${base}/runs/${firstRun}`);
  check(/运行日志/.test(await page.textContent('main')), 'a run\'s page in Chinese');
  await visit(page, `${base}/jobs`);
  check((await page.textContent('h1')).trim() === '任务', 'the jobs heading in Chinese');
  check(/下次触发/.test(await page.textContent('#jobs tr')), 'the jobs columns in Chinese');
  check(/共 [\d,]+ 个任务/.test(await page.textContent('#jobs-total')), 'the jobs total');
  // The job editor, its state and trigger cards, and a script job's source and versions.
  await visit(page, `${base}/jobs/new`);
  check((await page.textContent('h1')).trim() === '新建任务', 'the new job heading in Chinese');
  await visit(page, `${base}/jobs/${state.cronJob}`);
  const form = await page.textContent('#job-form');
  check(/调度类型/.test(form) && /路由策略/.test(form), `the job editor in Chinese: ${form}`);
  check((await page.textContent('#job-state h2')).trim() === '状态', 'the state card in Chinese');
  check((await page.textContent('#trigger-job')).trim() === '触发', 'the trigger button');
  check((await axeFindings(page)).length === 0, 'axe findings on the Chinese job editor');
  await visit(page, `${base}/jobs/${state.scriptJob}`);
  check((await page.textContent('#glue h2')).trim() === '脚本源码', 'the script source heading');
  check(/版本/.test(await page.textContent('#glue-versions tr')), 'the versions in Chinese');
  check((await page.textContent('#save-glue')).trim() === '保存源码', 'the save source button');
  await shot(page, 'script-job-zh');
  // The scheduling fields, the backfill card and the calendars pages.
  await visit(page, `${base}/jobs/${state.policyJob}`);
  const policies = await page.textContent('#job-form');
  for (const label of ['随机延迟', '补跑窗口', '补跑方式', '日历方式', '夏令时跳过的时刻',
    '夏令时重复的时刻', '重叠策略']) {
    check(policies.includes(label), `the job editor shows ${label}: ${policies}`);
  }
  await visit(page, `${base}/jobs/${state.backfillJob}`);
  check((await page.textContent('#backfills h2')).trim() === '补跑', 'the backfill card heading');
  check((await page.textContent('#start-backfill')).trim() === '开始补跑', 'the start button');
  check(/状态/.test(await page.textContent('#backfills thead')), 'the backfill columns');
  check((await axeFindings(page)).length === 0, 'axe findings on the Chinese backfill card');
  await shot(page, 'job-backfill-zh');
  await visit(page, `${base}/calendars`);
  check((await page.textContent('h1')).trim() === '日历', 'the calendars heading in Chinese');
  check((await page.textContent('#new-calendar')).trim() === '新建日历', 'the new calendar link');
  await visit(page, `${base}/calendars/new`);
  check((await page.textContent('#save-calendar')).trim() === '保存日历', 'the save calendar button');
  check(/规则/.test(await page.textContent('#calendar-form')), 'the rules field in Chinese');
  check((await axeFindings(page)).length === 0, 'axe findings on the Chinese calendar editor');
  await shot(page, 'calendar-editor-zh');
  await visit(page, `${base}/executors`);
  check((await page.textContent('h1')).trim() === '执行器与分组', 'the executors heading');
  check(/心跳/.test(await page.textContent('main')), 'the executors table in Chinese');
  check((await axeFindings(page)).length === 0, 'axe findings on the Chinese executors page');
  await Promise.all([page.waitForNavigation(), page.click('#lang-en')]);
  check(await page.getAttribute('html', 'lang') === 'en', 'back to English');
  await logout(page);
});

step('axe-core finds no serious or critical issue on any page', async (page) => {
  await login(page, adminUser, adminPassword);
  const pages = [
    '/', '/jobs', '/jobs/new', `/jobs/${state.cronJob}`, `/jobs/${state.scriptJob}`,
    `/jobs/${state.policyJob}`, `/jobs/${state.backfillJob}`,
    '/runs', `/runs/${state.killedRun}`, '/executors', '/groups/new', `/groups/${groupId}`,
    '/calendars', '/calendars/new', '/users', '/audit', '/account', '/no-such-page',
  ];
  const found = [];
  for (const url of pages) {
    await visit(page, `${base}${url}`);
    for (const finding of await axeFindings(page)) { found.push(`${url}: ${finding}`); }
  }
  await visit(page, `${base}/`);
  await logout(page);
  for (const finding of await axeFindings(page)) { found.push(`/login: ${finding}`); }
  check(found.length === 0, `axe findings:\n  ${found.join('\n  ')}`);
});

step('a viewer sees no edit controls and a forged post is refused', async (page) => {
  await login(page, 'victor', 'viewer-password-1');
  await page.goto(`${base}/jobs`);
  await page.waitForSelector(`tr[data-job-id="${state.cronJob}"]`);
  check(!(await page.$('#new-job')), 'no New job for a viewer');
  check(!(await page.$(`#start-${state.cronJob}`)), 'no Start button for a viewer');
  await shot(page, 'viewer-jobs');
  await page.goto(`${base}/jobs/${state.cronJob}`);
  check(!(await page.$('#save-job')), 'no Save for a viewer');
  check(!(await page.$('#trigger-form')), 'no trigger form for a viewer');
  check(await page.$('#job-form fieldset[disabled]'), 'the job form is read-only');
  const why = await page.textContent('#read-only');
  check(/may read this job but not change it/.test(why), `the viewer is told why: ${why}`);
  check(!/No executor group yet/.test(await page.content()), 'no wrong "no group" message');
  const csrf = await page.getAttribute('input[name=csrf]', 'value');
  const answer = await forgedPost(page, `/jobs/${state.cronJob}/start`, { csrf });
  check(answer.status === 403, `viewer's forged start: HTTP ${answer.status}`);
  check(/missing permission jobs\.operate/.test(answer.text), 'the API names the permission');
  check(!(await page.$('a[href="/users"]')), 'no Users page for a viewer');
  await logout(page);
});

(async () => {
  fs.mkdirSync(shots, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'xjob-console-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: need('XJOB_CHROMIUM'),
    headless: true,
    viewport: { width: 1280, height: 900 },
    timezoneId: 'Asia/Tokyo',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  watchDialogs(page);
  let failed = false;
  for (const { name, run } of steps) {
    const started = Date.now();
    try {
      await run(page);
      console.log(`ok   ${name} (${Date.now() - started} ms)`);
    } catch (error) {
      failed = true;
      console.log(`FAIL ${name}: ${error.message}`);
      await shot(page, 'failure').catch(() => {});
      console.log(`     at ${page.url()}`);
      break;
    }
  }
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
})().catch((error) => {
  console.log(`FAIL ${error.stack}`);
  process.exit(1);
});
