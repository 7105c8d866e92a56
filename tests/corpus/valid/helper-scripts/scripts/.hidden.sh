#!/usr/bin/env bash
echo hidden
