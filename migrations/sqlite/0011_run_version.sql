-- the version of the skill a run called: installed skills keep several side
-- by side, and `name@version` may call one that is not the active one.
alter table runs add column skill_version text;
