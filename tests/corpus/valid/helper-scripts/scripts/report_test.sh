#!/usr/bin/env bash
echo test
