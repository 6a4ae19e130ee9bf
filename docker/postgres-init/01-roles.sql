-- Run once by the official postgres image (as POSTGRES_USER, in POSTGRES_DB)
-- when its data volume is empty. Two roles:
--   safe_retries_owner  owns the database and its schema: runs the migrations (DDL);
--   safe_retries_app    the service: reads and writes rows (DML), can change no table.
-- Tables the owner creates later give the app DML rights through default privileges.
-- The passwords are for local use; set real ones (ALTER ROLE ... PASSWORD) anywhere else.
CREATE ROLE safe_retries_owner LOGIN PASSWORD 'owner';
CREATE ROLE safe_retries_app LOGIN PASSWORD 'app';

ALTER DATABASE safe_retries OWNER TO safe_retries_owner;
ALTER SCHEMA public OWNER TO safe_retries_owner;
REVOKE ALL ON DATABASE safe_retries FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE safe_retries TO safe_retries_app;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO safe_retries_app;

ALTER DEFAULT PRIVILEGES FOR ROLE safe_retries_owner IN SCHEMA public
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO safe_retries_app;
ALTER DEFAULT PRIVILEGES FOR ROLE safe_retries_owner IN SCHEMA public
  GRANT USAGE, SELECT ON SEQUENCES TO safe_retries_app;
