#!/bin/bash
# Rotate non-empty DIR/*.log files, keeping KEEP numbered rotations.
dir=$1
keep=$2
shopt -s nullglob
for log in "$dir"/*.log; do
    [ -f "$log" ] && [ -s "$log" ] || continue
    # drop rotations beyond the limit, then shift the rest up by one
    for old in "$log".*; do
        n=${old##*.}
        [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge "$keep" ] && rm -f -- "$old"
    done
    for ((i = keep - 1; i >= 1; i--)); do
        [ -e "$log.$i" ] && mv -- "$log.$i" "$log.$((i + 1))"
    done
    mode=$(stat -c %a -- "$log")
    mv -- "$log" "$log.1"
    : > "$log"
    chmod "$mode" -- "$log"
    echo "rotated $(basename -- "$log")"
done
