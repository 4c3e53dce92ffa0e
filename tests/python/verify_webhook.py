"""Verifies genjobs' client webhooks with the Standard Webhooks reference package, as a real
receiver would: reads {"secret", "deliveries": [{"headers", "body"}]} on stdin, verifies each
delivery with the secret, and prints one JSON line: the payload types it verified.
A delivery that does not verify raises, and the process exits non-zero."""

import json
import sys

from standardwebhooks.webhooks import Webhook


def main() -> None:
    request = json.load(sys.stdin)
    hook = Webhook(request["secret"])
    verified = []
    for delivery in request["deliveries"]:
        payload = hook.verify(delivery["body"], delivery["headers"])
        verified.append(payload["type"])
    print(json.dumps({"verified": verified}))


if __name__ == "__main__":
    main()
