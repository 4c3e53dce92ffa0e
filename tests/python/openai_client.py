"""OpenAI's official Python package (openai 3.57.0) against genjobs' OpenAI-compatible edge.

Run by the Rust test `openai_clients::the_official_openai_python_client_works_against_genjobs` with
OPENAI_BASE_URL at a running genjobs' /openai/v1, OPENAI_API_KEY a user's key and
GENJOBS_POOR_KEY the key of a user with 1 credit. Every check is an assert; the last line of
output is a JSON report for the Rust test.
"""

import base64
import io
import json
import os
import struct
import time
import urllib.request
import zlib

import openai
from openai import OpenAI


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def png(width: int, height: int) -> bytes:
    """A PNG of one colour, as a user's file would be."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\xc8\x28\x28" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


client = OpenAI(max_retries=0)
jobs = 0

# images.generate with a URL: the URL serves a real PNG of the nearest aspect ratio.
images = client.images.generate(model="nano-banana", prompt="a lighthouse at dusk", n=2, size="1024x1024")
assert isinstance(images.created, int), images
assert len(images.data) == 2, images
jobs += 1
for image in images.data:
    with urllib.request.urlopen(image.url) as answer:
        width, height = png_size(answer.read())
    assert width == height, (width, height)

# images.generate with b64_json: the bytes themselves; 1024x1792 is the model's 9:16.
tall = client.images.generate(model="flux-pro", prompt="a fox", size="1024x1792", response_format="b64_json")
width, height = png_size(base64.b64decode(tall.data[0].b64_json))
assert width < height, (width, height)
jobs += 1

# images.edit with one file, then several (`image[]`), as the package uploads them.
edited = client.images.edit(model="nano-banana", image=("fox.png", png(16, 16), "image/png"), prompt="make it blue")
assert len(edited.data) == 1 and edited.data[0].url, edited
several = client.images.edit(
    model="nano-banana",
    image=[("a.png", png(8, 8), "image/png"), ("b.png", io.BytesIO(png(8, 4)), "image/png")],
    prompt="merge them",
    n=2,
    size="1536x1024",
    response_format="b64_json",
)
width, height = png_size(base64.b64decode(several.data[1].b64_json))
assert len(several.data) == 2 and width > height, (len(several.data), width, height)
jobs += 2
try:
    client.images.edit(model="nano-banana", image=("notes.png", b"just text", "image/png"), prompt="x")
    raise AssertionError("a file that is not an image was accepted")
except openai.BadRequestError as e:
    assert e.status_code == 400 and e.body["param"] == "image", e.body

# A failed job answers 502 with x-should-retry: false, so that even a client that retries 5xx
# sends it once and pays for one job.
try:
    OpenAI(max_retries=2).images.generate(model="nano-banana", prompt="[sim:fail] no luck")
    raise AssertionError("a failed job answered images")
except openai.APIStatusError as e:
    assert e.status_code == 502 and e.response.headers["x-should-retry"] == "false", e
jobs += 1

# Errors raise the exception classes they raise for OpenAI itself, with OpenAI's error body.
try:
    client.images.generate(model="dall-e-3", prompt="x")
    raise AssertionError("an unknown model was accepted")
except openai.BadRequestError as e:
    assert e.status_code == 400 and e.body["param"] == "model", e.body
try:
    OpenAI(api_key="gj_wrong", max_retries=0).images.generate(model="nano-banana", prompt="x")
    raise AssertionError("a wrong key was accepted")
except openai.AuthenticationError as e:
    assert e.status_code == 401, e
try:
    OpenAI(api_key=os.environ["GENJOBS_POOR_KEY"], max_retries=0).images.generate(model="nano-banana", prompt="x")
    raise AssertionError("a user without credits was served")
except openai.APIStatusError as e:
    assert e.status_code == 402 and "credits" in e.message, e

# videos.create (multipart/form-data, as the package sends it), polled to the end, downloaded.
video = client.videos.create(model="seedance-2.0-fast", prompt="waves on a rock", seconds="4", size="1280x720")
assert video.object == "video" and video.status in ("queued", "in_progress"), video
assert isinstance(video.created_at, int) and video.size == "1280x720", video
done = client.videos.poll(video.id, poll_interval_ms=100)
assert done.status == "completed" and done.progress == 100, done
mp4 = client.videos.download_content(video.id).read()
assert mp4[4:8] == b"ftyp", mp4[:16]
jobs += 1

# videos.create_and_poll: the package's own helper, polling at the interval genjobs names.
polled = client.videos.create_and_poll(model="seedance-2.0-fast", prompt="rain", seconds="4", poll_interval_ms=100)
assert polled.status == "completed" and polled.completed_at and polled.seconds == "4", polled
jobs += 1

# The same Idempotency-Key and fields: the same video, paid once.
keyed = {"Idempotency-Key": "python-video-1"}
first = client.videos.create(model="seedance-2.0-fast", prompt="snow", seconds="4", extra_headers=keyed)
again = client.videos.create(model="seedance-2.0-fast", prompt="snow", seconds="4", extra_headers=keyed)
assert first.id == again.id, (first, again)
client.videos.poll(first.id, poll_interval_ms=100)
jobs += 1

# videos.delete of a running video cancels it; it leaves the list and is 404 afterwards.
running = client.videos.create(model="seedance-2.0-fast", prompt="forever [sim:hang]", seconds="4")
deleted = client.videos.delete(running.id)
assert deleted.deleted and deleted.id == running.id and deleted.object == "video.deleted", deleted
try:
    client.videos.retrieve(running.id)
    raise AssertionError("a deleted video was read")
except openai.NotFoundError:
    pass
jobs += 1

# videos.list, page by page through the package's own paging: newest first, deleted left out.
listed = [v.id for v in client.videos.list(limit=2)]
assert listed == [first.id, polled.id, video.id], listed
oldest = client.videos.list(order="asc", limit=1)
assert [v.id for v in oldest.data] == [video.id] and oldest.has_more, oldest

models = [model.id for model in client.models.list()]
assert "nano-banana" in models and "seedance-2.0-fast" in models, models

# The Batch API: a JSONL file of requests, a batch of it at the batch price, read until completed,
# its output and error files read; a second batch canceled; both listed newest first.
def request_line(custom_id: str, prompt: str) -> str:
    body = {"model": "nano-banana", "prompt": prompt, "size": "1024x1024"}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/images/generations", "body": body})


def batch_of(lines: list[str], name: str):
    content = "\n".join(lines).encode()
    uploaded = client.files.create(file=(name, content, "application/jsonl"), purpose="batch")
    assert uploaded.object == "file" and uploaded.purpose == "batch" and uploaded.bytes == len(content), uploaded
    assert client.files.content(uploaded.id).read() == content
    return client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/images/generations", completion_window="24h", metadata={"run": name}
    )


def until_final(batch):
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        time.sleep(0.1)
        batch = client.batches.retrieve(batch.id)
    return batch


batch = batch_of([request_line("a", "a cat"), request_line("b", "a dog"), request_line("c", "[sim:fail] no")], "tiles")
assert batch.status == "in_progress" and batch.request_counts.total == 3, batch
done = until_final(batch)
assert done.status == "completed" and done.completed_at, done
assert (done.request_counts.completed, done.request_counts.failed) == (2, 1), done.request_counts
output = [json.loads(line) for line in client.files.content(done.output_file_id).text.splitlines()]
assert [line["custom_id"] for line in output] == ["a", "b"], output
assert all(line["response"]["status_code"] == 200 and line["response"]["body"]["data"][0]["url"] for line in output)
errors = [json.loads(line) for line in client.files.content(done.error_file_id).text.splitlines()]
assert [line["custom_id"] for line in errors] == ["c"] and errors[0]["error"]["code"], errors
assert client.files.retrieve(done.output_file_id).purpose == "batch_output"
jobs += 3

hanging = batch_of([request_line("h1", "forever [sim:hang]"), request_line("h2", "again [sim:hang]")], "hanging")
canceling = client.batches.cancel(hanging.id)
assert canceling.status in ("cancelling", "cancelled"), canceling
canceled = until_final(canceling)
assert canceled.status == "cancelled" and canceled.request_counts.failed == 2, canceled
assert canceled.output_file_id is None and canceled.error_file_id, canceled
jobs += 2

listed = [b.id for b in client.batches.list(limit=1)]
assert listed == [hanging.id, batch.id], listed

print(json.dumps({"jobs": jobs, "models": len(models), "batches": {"completed": batch.id, "cancelled": hanging.id}}))
