"""OpenAI's official Python package (openai 3.57.0) against genjobs' OpenAI-compatible edge.

Run by the Rust test `openai::the_official_openai_python_client_works_against_genjobs` with
OPENAI_BASE_URL at a running genjobs' /openai/v1, OPENAI_API_KEY a user's key and
GENJOBS_POOR_KEY the key of a user with 1 credit. Every check is an assert; the last line of
output is a JSON report for the Rust test.
"""

import base64
import json
import os
import struct
import urllib.request

import openai
from openai import OpenAI


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


client = OpenAI(max_retries=0)

# images.generate with a URL: the URL serves a real PNG of the nearest aspect ratio.
images = client.images.generate(model="nano-banana", prompt="a lighthouse at dusk", n=2, size="1024x1024")
assert isinstance(images.created, int), images
assert len(images.data) == 2, images
for image in images.data:
    with urllib.request.urlopen(image.url) as answer:
        width, height = png_size(answer.read())
    assert width == height, (width, height)

# images.generate with b64_json: the bytes themselves; 1024x1792 is the model's 9:16.
tall = client.images.generate(model="flux-pro", prompt="a fox", size="1024x1792", response_format="b64_json")
width, height = png_size(base64.b64decode(tall.data[0].b64_json))
assert width < height, (width, height)

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

models = [model.id for model in client.models.list()]
assert "nano-banana" in models and "seedance-2.0-fast" in models, models

print(json.dumps({"jobs": 3, "models": len(models)}))
