# Common functions; source this file from the other scripts.
hello() { echo hi; }
