#!/bin/bash
# Copy .txt and .md files from SRC to DEST keeping the structure.
SRC=$1
DEST=$2
count=0
while IFS= read -r -d '' f; do
    rel=${f#"$SRC"/}
    mkdir -p -- "$DEST/$(dirname -- "$rel")"
    cp -- "$f" "$DEST/$rel"
    count=$((count+1))
done < <(find "$SRC" -type f \( -name '*.txt' -o -name '*.md' \) -print0)
echo "backed up $count files"
