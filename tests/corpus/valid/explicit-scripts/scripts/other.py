#!/usr/bin/env python3
print('other')
