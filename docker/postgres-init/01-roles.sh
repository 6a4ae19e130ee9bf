#!/usr/bin/env bash
# Run once by the official postgres image (as POSTGRES_USER, in POSTGRES_DB) when its
# data volume is empty. Two roles, their passwords from the environment (docker/.env):
#   safe_retries_owner  owns the database and its schema: runs the migrations (DDL);
#   safe_retries_app    the service: reads and writes rows (DML), can change no table.
# Tables the owner creates later give the app DML rights through default privileges.
# The passwords are psql variables (:'name' quotes them as literals), never spliced into SQL.
# A `${VAR:?}` that is unset stops the initialisation, whether this file is run or sourced.
: "${DB_OWNER_PASSWORD:?DB_OWNER_PASSWORD is not set (see docker/.env.example)}"
: "${DB_APP_PASSWORD:?DB_APP_PASSWORD is not set (see docker/.env.example)}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v owner_password="$DB_OWNER_PASSWORD" -v app_password="$DB_APP_PASSWORD" <<'SQL'
CREATE ROLE safe_retries_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE safe_retries_app LOGIN PASSWORD :'app_password';

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
SQL
