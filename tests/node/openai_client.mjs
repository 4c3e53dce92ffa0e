// OpenAI's official Node package (openai 7.55.0) against genjobs' OpenAI-compatible edge.
//
// Run by the Rust test `openai_clients::the_official_openai_node_client_works_against_genjobs`
// with OPENAI_BASE_URL at a running genjobs' /openai/v1, OPENAI_API_KEY a user's key and
// GENJOBS_NODE_TOOLS the directory scripts/install-node-tools.sh installed the package into.
// Every check is an assert; the last line of output is a JSON report for the Rust test.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import zlib from 'node:zlib';

const require = createRequire(path.join(process.env.GENJOBS_NODE_TOOLS, 'package.json'));
const { OpenAI, toFile, APIError, NotFoundError, BadRequestError } = require('openai');

/** A PNG of one colour, as a user's file would be. */
function png(width, height) {
  const table = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (bytes) => {
    let c = 0xffffffff;
    for (const b of bytes) c = table[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (kind, data) => {
    const body = Buffer.concat([Buffer.from(kind), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([length, body, sum]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const row = Buffer.concat([Buffer.from([0]), Buffer.alloc(width * 3, 0x80)]);
  const rows = Buffer.concat(Array.from({ length: height }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', zlib.deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function pngSize(bytes) {
  assert.deepEqual([...bytes.subarray(1, 4)], [0x50, 0x4e, 0x47], 'not a PNG');
  return [bytes.readUInt32BE(16), bytes.readUInt32BE(20)];
}

async function rejects(promise, check) {
  try {
    await promise;
  } catch (e) {
    check(e);
    return;
  }
  assert.fail('the call succeeded');
}

const client = new OpenAI({ maxRetries: 0 });
let jobs = 0;

// images.generate, as links and as base64.
const images = await client.images.generate({ model: 'nano-banana', prompt: 'a lighthouse', n: 2, size: '1024x1024' });
assert.equal(images.data.length, 2);
const linked = Buffer.from(await (await fetch(images.data[0].url)).arrayBuffer());
const [w, h] = pngSize(linked);
assert.equal(w, h);
jobs += 1;

// images.edit with several files (`image[]`), as the package uploads them.
const files = [await toFile(png(8, 8), 'a.png', { type: 'image/png' }), await toFile(png(4, 8), 'b.png', { type: 'image/png' })];
const edited = await client.images.edit({ model: 'nano-banana', image: files, prompt: 'merge', size: '1024x1536', response_format: 'b64_json' });
const [ew, eh] = pngSize(Buffer.from(edited.data[0].b64_json, 'base64'));
assert.ok(ew < eh, `${ew}x${eh}`);
jobs += 1;
const text = await toFile(Buffer.from('just text'), 'notes.png', { type: 'image/png' });
await rejects(client.images.edit({ model: 'nano-banana', image: text, prompt: 'x' }), (e) => {
  assert.ok(e instanceof BadRequestError, String(e));
  assert.equal(e.param, 'image');
});

// A failed job: 502 with x-should-retry: false, so that a client that retries sends it once.
await rejects(new OpenAI({ maxRetries: 2 }).images.generate({ model: 'nano-banana', prompt: '[sim:fail] no luck' }), (e) => {
  assert.ok(e instanceof APIError && e.status === 502, String(e));
  assert.equal(e.headers.get('x-should-retry'), 'false');
});
jobs += 1;

// videos.create (a form), polled with retrieve at the interval genjobs names, downloaded.
async function poll(id) {
  for (;;) {
    const { data: video, response } = await client.videos.retrieve(id).withResponse();
    if (video.status === 'completed' || video.status === 'failed') return video;
    await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('openai-poll-after-ms') ?? 100)));
  }
}
const video = await client.videos.create({ model: 'seedance-2.0-fast', prompt: 'waves', seconds: '4', size: '1280x720' });
assert.equal(video.object, 'video');
assert.equal(video.size, '1280x720');
const done = await poll(video.id);
assert.equal(done.status, 'completed');
assert.ok(Number.isInteger(done.completed_at));
const mp4 = Buffer.from(await (await client.videos.downloadContent(video.id)).arrayBuffer());
assert.equal(mp4.subarray(4, 8).toString(), 'ftyp');
jobs += 1;

// The same Idempotency-Key and fields: the same video.
const keyed = { headers: { 'Idempotency-Key': 'node-video-1' } };
const first = await client.videos.create({ model: 'seedance-2.0-fast', prompt: 'snow', seconds: '4' }, keyed);
const again = await client.videos.create({ model: 'seedance-2.0-fast', prompt: 'snow', seconds: '4' }, keyed);
assert.equal(again.id, first.id);
await poll(first.id);
jobs += 1;

// videos.delete of a running video: canceled, then 404 and out of the list.
const running = await client.videos.create({ model: 'seedance-2.0-fast', prompt: 'forever [sim:hang]', seconds: '4' });
const deleted = await client.videos.delete(running.id);
assert.deepEqual(deleted, { id: running.id, object: 'video.deleted', deleted: true });
await rejects(client.videos.retrieve(running.id), (e) => assert.ok(e instanceof NotFoundError, String(e)));
jobs += 1;

// videos.list through the package's own paging.
const listed = [];
for await (const item of client.videos.list({ limit: 1 })) listed.push(item.id);
assert.deepEqual(listed, [first.id, video.id]);
const oldest = await client.videos.list({ order: 'asc', limit: 1 });
assert.deepEqual(oldest.data.map((v) => v.id), [video.id]);
assert.equal(oldest.has_more, true);

const models = [];
for await (const model of client.models.list()) models.push(model.id);
assert.ok(models.includes('nano-banana') && models.includes('seedance-2.0-fast'));

// The Batch API: a JSONL file of requests, a batch of it at the batch price, read until completed,
// its output and error files read; a second batch canceled; both listed newest first.
const requestLine = (customId, prompt) =>
  JSON.stringify({ custom_id: customId, method: 'POST', url: '/v1/images/generations', body: { model: 'nano-banana', prompt } });
async function batchOf(lines, name) {
  const content = Buffer.from(lines.join('\n'));
  const uploaded = await client.files.create({ file: await toFile(content, name), purpose: 'batch' });
  assert.equal(uploaded.object, 'file');
  assert.equal(uploaded.bytes, content.length);
  assert.equal(await (await client.files.content(uploaded.id)).text(), content.toString());
  return client.batches.create({ input_file_id: uploaded.id, endpoint: '/v1/images/generations', completion_window: '24h' });
}
async function untilFinal(batch) {
  while (!['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    batch = await client.batches.retrieve(batch.id);
  }
  return batch;
}
const batch = await batchOf([requestLine('a', 'a cat'), requestLine('b', 'a dog'), requestLine('c', '[sim:fail] no')], 'tiles.jsonl');
assert.equal(batch.status, 'in_progress');
const finished = await untilFinal(batch);
assert.equal(finished.status, 'completed');
assert.deepEqual(finished.request_counts, { total: 3, completed: 2, failed: 1 });
const output = (await (await client.files.content(finished.output_file_id)).text()).trim().split('\n').map((l) => JSON.parse(l));
assert.deepEqual(output.map((l) => l.custom_id), ['a', 'b']);
assert.ok(output.every((l) => l.response.status_code === 200 && l.response.body.data[0].url));
const failures = (await (await client.files.content(finished.error_file_id)).text()).trim().split('\n').map((l) => JSON.parse(l));
assert.deepEqual(failures.map((l) => l.custom_id), ['c']);
jobs += 3;
const hanging = await batchOf([requestLine('h1', 'forever [sim:hang]'), requestLine('h2', 'again [sim:hang]')], 'hanging.jsonl');
const canceling = await client.batches.cancel(hanging.id);
assert.ok(['cancelling', 'cancelled'].includes(canceling.status), canceling.status);
const canceled = await untilFinal(canceling);
assert.equal(canceled.status, 'cancelled');
assert.equal(canceled.request_counts.failed, 2);
assert.equal(canceled.output_file_id, null);
jobs += 2;
const batches = [];
for await (const item of client.batches.list({ limit: 1 })) batches.push(item.id);
assert.deepEqual(batches, [hanging.id, batch.id]);

console.log(JSON.stringify({ jobs, models: models.length, batches: { completed: batch.id, cancelled: hanging.id } }));
