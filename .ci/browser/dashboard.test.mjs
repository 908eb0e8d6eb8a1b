// Browser test of the `abide serve` dashboard, run by .ci/run:
//   node --test .ci/browser/dashboard.test.mjs
// Starts `abide provider` (10/s per key, Retry-After as an HTTP-date, so the raw value is
// recognisable) and `abide serve` with two senders on that key, one ignoring the rate-limit
// headers (a throttle phase), and one allowed a single attempt per item (its throttled items
// end DEFERRED), then drives Debian's chromium with playwright-core; at the end a second tab
// checks that the charts start from serve's history. Screenshots go to $ABIDE_CI_OUT (default
// .ci/out, gitignored).
//
// Env: ABIDE_BIN (default target/debug/abide), CHROMIUM (default /usr/bin/chromium).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";

const ROOT = resolve(import.meta.dirname, "../..");
const BIN = resolve(ROOT, process.env.ABIDE_BIN || "target/debug/abide");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const OUT = resolve(ROOT, process.env.ABIDE_CI_OUT || ".ci/out");
const TOKEN = "ci-dashboard-token-0123456789abcdef";
// Every wait is bounded; none is a timing assertion.
const WAIT_MS = 60_000;

const children = [];

/** Start `abide ARGS`, resolve with the URL of its `listening on http://ADDR` line. */
function start(args, env) {
  const child = spawn(BIN, args, {
    env: { ...process.env, RUST_LOG: "warn", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${args[0]}: no listening line`)), WAIT_MS);
    child.on("exit", (code) => fail(new Error(`${args[0]} exited early (${code})`)));
    const lines = createInterface({ input: child.stdout });
    lines.once("line", (line) => {
      clearTimeout(timer);
      const url = line.replace(/^listening on /, "");
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/, `first line of ${args[0]}: ${line}`);
      ok(url);
    });
  });
}

async function api(base, method, path, body, token) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const r = await fetch(base + path, { method, headers, body: body && JSON.stringify(body) });
  return { status: r.status, body: await r.json().catch(() => null) };
}

/** `page.waitForFunction`, failing with what the page showed (and a screenshot). */
async function until(page, what, fn, arg) {
  try {
    await page.waitForFunction(fn, arg, { timeout: WAIT_MS });
  } catch (e) {
    const shown = await page.evaluate(() => ["status", "providers", "recent", "actions"]
      .map((id) => `${id}: ${document.getElementById(id)?.innerText}`).join("\n")).catch(() => "?");
    await page.screenshot({ path: join(OUT, "dashboard-failure.png"), fullPage: true }).catch(() => {});
    throw new Error(`waiting for ${what}: ${e.message}\n${shown}`);
  }
}

test("dashboard shows live pace, states, throttles; requeue needs the token", { timeout: 300_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "abide-dashboard-"));
  mkdirSync(OUT, { recursive: true });
  let browser;
  t.after(async () => {
    if (browser) await browser.close();
    for (const c of children) if (c.exitCode === null) c.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });

  const provider = await start(
    ["provider", "--listen", "127.0.0.1:0", "--key-rate", "10/s", "--key-concurrency", "off",
      "--api-key", "demo-key", "--behaviour", "retry-after=imf-fixdate"],
    {},
  );
  const cfg = join(dir, "providers.toml");
  writeFileSync(cfg, `
[[provider]]
name = "sms"
base_url = "${provider}"
credentials_env = "ABIDE_CI_SMS_TOKEN"
rate_hint = 40.0
concurrency = 4

# Another sender on the same key that ignores the rate-limit headers: the throttle phase.
[[provider]]
name = "sms-bulk"
base_url = "${provider}"
credentials_env = "ABIDE_CI_SMS_TOKEN"
rate_hint = 20.0
concurrency = 2
[provider.pacer]
use_rate_limit_headers = false

# One attempt per item, on the same key, ignoring the headers: its throttled items end
# DEFERRED (the attempt cap), for the requeue below. (A wrong key no longer defers: it
# stops its provider, the items wait.)
[[provider]]
name = "one-try"
base_url = "${provider}"
credentials_env = "ABIDE_CI_SMS_TOKEN"
rate_hint = 20.0
concurrency = 2
[provider.pacer]
use_rate_limit_headers = false
[provider.retry]
max_attempts = 1
`);
  const base = await start(
    ["serve", "--config", cfg, "--db", join(dir, "outbox.db"), "--listen", "127.0.0.1:0"],
    { ABIDE_TOKEN: TOKEN, ABIDE_CI_SMS_TOKEN: "demo-key" },
  );

  const items = [];
  for (let i = 0; i < 150; i++) {
    for (const p of ["sms", "sms-bulk"]) {
      items.push({ provider: p, path: "/v1/messages", body: { to: "+15550100", n: i }, idempotency_key: `${p}-${i}` });
    }
  }
  for (let i = 0; i < 40; i++) {
    items.push({ provider: "one-try", path: "/v1/messages", body: { n: i }, idempotency_key: `one-${i}` });
  }
  const enq = await api(base, "POST", "/v1/items", items, TOKEN);
  assert.equal(enq.status, 202, JSON.stringify(enq.body));

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  // A CSP violation (an inline style or script the policy blocks) shows only on the console.
  page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) errors.push(m.text()); });
  await page.goto(`${base}/?interval_ms=250`);
  await page.screenshot({ path: join(OUT, "dashboard-start.png"), fullPage: true });

  // Accessibility basics: every input labelled, every chart named, a live status region.
  const unlabeled = await page.$$eval("input", (els) => els.filter((e) => e.labels.length === 0).length);
  assert.equal(unlabeled, 0, "every input has a label");
  assert.equal(await page.getAttribute("#status", "role"), "status");

  // State counts update: SUBMITTED grows while the page is open.
  const submitted = async () => Number(await page.textContent("#count-submitted")) || 0;
  await until(page, "SUBMITTED above 0", () => Number(document.querySelector("#count-submitted").textContent) > 0, null);
  const first = await submitted();
  await until(page, "SUBMITTED to grow", (n) => Number(document.querySelector("#count-submitted").textContent) > n, first);
  assert.ok((await submitted()) > first);

  // The pace chart of sms draws and keeps receiving points (its advertised limit shows).
  const pace = page.locator('.chart[data-provider="sms"]');
  await pace.waitFor({ timeout: WAIT_MS });
  const paceId = await pace.getAttribute("id");
  await until(page, "3 points on the sms pace chart", (id) => Number(document.getElementById(id).getAttribute("data-points")) >= 3, paceId);
  const points = Number(await pace.getAttribute("data-points"));
  await until(page, "more points on the sms pace chart", ([id, n]) => Number(document.getElementById(id).getAttribute("data-points")) > n, [paceId, points]);
  assert.equal(await pace.locator("canvas").count(), 1, "uPlot drew a canvas");
  await until(page, "pace and advertised limit in the sms caption", (id) => /pace \d.*advertised \d/.test(document.getElementById(id + "-caption").textContent), paceId);

  // The throttle shows, with the raw Retry-After heard (an HTTP-date: ends in GMT).
  await until(page, "a raw Retry-After (HTTP-date) for sms-bulk", () => {
    const r = document.querySelector('#providers tr[data-provider="sms-bulk"] .retry-after');
    return r && /GMT/.test(r.textContent);
  }, null);
  const row = page.locator('#providers tr[data-provider="sms-bulk"]');
  assert.equal(await row.locator(".pause-reason").textContent(), "http_429");
  // Requests on the wire are a count of their own, apart from the claimed IN_FLIGHT items.
  assert.match(await row.locator(".on-wire").textContent(), /^\d+$/);
  assert.match(await row.locator(".retry-after").textContent(), /^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$/);
  // Its learned ceiling shows on its pace chart, next to the pace.
  const bulkChart = await page.locator('.chart[data-provider="sms-bulk"]').getAttribute("id");
  await until(page, "a learned ceiling for sms-bulk", (id) => /learned ceiling \d/.test(document.getElementById(id + "-caption").textContent), bulkChart);
  // The throttle chart has a series per provider.
  assert.match(await page.textContent("#chart-throttle-caption"), /sms-bulk \d/);
  await page.screenshot({ path: join(OUT, "dashboard-throttled.png"), fullPage: true });

  // Requeue a DEFERRED item: refused without the token, done with it.
  const deferredRow = page.locator('#recent tr[data-state="DEFERRED"]').first();
  await deferredRow.waitFor({ timeout: WAIT_MS });
  const id = await deferredRow.getAttribute("data-id");
  const rowOf = page.locator(`#recent tr[data-id="${id}"]`);
  await rowOf.locator("button.requeue").click();
  const action = (re) => until(page, `"${re}" in the actions list`, ([re, i]) => new RegExp(re).test(document.getElementById("actions").textContent) && document.getElementById("actions").textContent.includes(i), [re, id]);
  await action("refused: HTTP 401");
  const still = await api(base, "GET", `/v1/items/${id}`, null, TOKEN);
  assert.equal(still.body.item.state, "DEFERRED", "a refused requeue changed nothing");
  await page.screenshot({ path: join(OUT, "dashboard-requeue-refused.png"), fullPage: true });

  // With the token, by keyboard: type it, Enter submits the form, then Enter on the button.
  await page.focus("#token");
  await page.keyboard.type(TOKEN);
  await page.keyboard.press("Enter");
  await rowOf.locator("button.requeue").focus();
  // Polls keep the focus where the operator put it (rows are not rebuilt).
  const polls = Number(await page.getAttribute("body", "data-updates"));
  await until(page, "two more polls", (n) => Number(document.body.getAttribute("data-updates")) >= n + 2, polls);
  assert.equal(await page.evaluate(() => document.activeElement?.className), "requeue", "focus kept across polls");
  await page.keyboard.press("Enter");
  await action("Requeued .*: 1 item");
  await page.screenshot({ path: join(OUT, "dashboard-requeued.png"), fullPage: true });

  // The page never put the token in the URL or the DOM outside the password field.
  assert.ok(!page.url().includes(TOKEN));
  assert.ok(!(await page.textContent("body")).includes(TOKEN));

  // A tab opened now (or a reload) draws the charts from serve's history at once. Its live
  // polls are a minute apart, so more points than polls can only come from the history.
  let samples = 0;
  for (const deadline = Date.now() + WAIT_MS; samples < 3 && Date.now() < deadline;) {
    const h = await api(base, "GET", "/dashboard/history.json");
    assert.equal(h.status, 200);
    samples = h.body.providers.some((p) => p.name === "sms") ? h.body.t.length : 0;
    if (samples < 3) await new Promise((ok) => setTimeout(ok, 500));
  }
  assert.ok(samples >= 3, `3 samples with sms in serve's history, got ${samples}`);
  const later = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  later.on("pageerror", (e) => errors.push(String(e)));
  await later.goto(`${base}/?interval_ms=60000`);
  await until(later, "the history and a first poll", () => Number(document.body.getAttribute("data-history-points")) >= 3 && Number(document.body.getAttribute("data-updates")) >= 1, null);
  const polled = Number(await later.getAttribute("body", "data-updates"));
  const statePoints = Number(await later.getAttribute("#chart-states", "data-points"));
  assert.ok(statePoints >= 3 + polled, `${statePoints} points on the states chart after ${polled} poll(s)`);
  const laterPace = later.locator('.chart[data-provider="sms"]');
  assert.ok(Number(await laterPace.getAttribute("data-points")) >= 3 + polled, "the sms pace chart starts from the history");
  assert.match(await later.textContent("#chart-states-caption"), /loaded from the server on opening/);
  await later.screenshot({ path: join(OUT, "dashboard-reopened.png"), fullPage: true });
  assert.deepEqual(errors, [], "no script errors, no CSP violations");
});
