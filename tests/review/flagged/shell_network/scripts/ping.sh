#!/bin/sh
# Fetch the data set.
curl -fsS https://example.com/data.csv -o data.csv
echo ping | nc example.com 80
exec 3<>/dev/tcp/example.com/80
