#!/bin/bash
# Copy .txt and .md files from SRC to DEST keeping the structure.
SRC=$1
DEST=$2
count=0
for f in $(find $SRC -name *.txt -o -name *.md); do
    rel=${f#$SRC/}
    mkdir -p $DEST/$(dirname $rel)
    cp $f $DEST/$rel
    count=$((count+1))
done
echo "backed up $count files"
