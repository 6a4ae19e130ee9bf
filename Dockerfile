# syntax=docker/dockerfile:1
# Node 22 LTS on Debian bookworm (slim). Pinned by full version; at release, pin the
# index digest too (docker buildx imagetools inspect node:22.23.4-bookworm-slim, then
# FROM node:22.23.4-bookworm-slim@sha256:<digest>). It is not here because this file
# was written without access to the registry, and a guessed digest would only break builds.
ARG NODE_IMAGE=node:22.23.4-bookworm-slim

# Install scripts: package.json "allowScripts" lists which may run, but only npm 11
# reads it and this image ships npm 10, so every install runs with --ignore-scripts.
# Nothing the image needs has an install script: the allowed ones are the embedded
# PostgreSQL's binaries and @swc/core (tests); the build compiles with tsc.

# Build: compile TypeScript with the dev dependencies.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
COPY migrations ./migrations
RUN npx nest build

# Production dependencies only. --omit=optional leaves out @embedded-postgres/<platform>
# (PostgreSQL binaries, ~60 MB): the image always runs with DATABASE_URL, and the app
# looks for those binaries only when DATABASE_URL is unset.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force

# Run: dist/ and production dependencies, as the unprivileged node user.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
# Also in the image: `node dist/src/cli/migration.js run`, `node dist/src/cli/client-create.js <name>`
# (and client-rotate.js <name>, client-keys.js <name>, client-revoke.js <name> <prefix or id>).
CMD ["node", "dist/src/main.js"]
