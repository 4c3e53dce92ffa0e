#!/usr/bin/env bash
# Refreshes the Swagger UI files that /docs serves from inside the binary (no CDN: /docs must
# work offline). Usage: scripts/vendor-swagger-ui.sh [version]
set -euo pipefail
version="${1:-5.35.0}"
dest="$(dirname "$0")/../crates/http/assets/swagger-ui"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "swagger-ui-dist@$version" >/dev/null && tar xzf swagger-ui-dist-*.tgz)
mkdir -p "$dest"
for file in swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css LICENSE NOTICE; do
    cp "$work/package/$file" "$dest/$file"
done
# The bundle's last line names a source map that is not shipped; drop it so browsers do not ask.
sed -i '/^\/\/# sourceMappingURL=/d' "$dest/swagger-ui-bundle.js"
sed -i 's|/\*# sourceMappingURL=[^*]*\*/||' "$dest/swagger-ui.css"
echo "$version" > "$dest/VERSION"
echo "swagger-ui-dist $version vendored into $dest"
