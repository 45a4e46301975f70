#!/bin/bash
# runtime: 'raw' apps start from this file; runlog runs it with bash in the app directory.
exec node server.mjs
