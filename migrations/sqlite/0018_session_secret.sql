-- a session is a capability: its creator gets a secret, and later requests
-- on it show it (or a token of its own named caller). the store keeps only
-- the secret's sha-256, in hex; sessions made before this have none, and
-- a server without tokens refuses to steer them.
alter table sessions add column secret_sha256 text;
