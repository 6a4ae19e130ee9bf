# syntax=docker/dockerfile:1
# Node 24 LTS on Debian bookworm (slim); the service supports Node 22.13+ and 24.11+. The
# tag follows 24's patch releases; at release, pin the index digest too
# (docker buildx imagetools inspect node:24-bookworm-slim, then
# FROM node:24-bookworm-slim@sha256:<digest>). It is not here because this file was
# written without access to the registry, and a guessed digest would only break builds.
ARG NODE_IMAGE=node:24-bookworm-slim

# Every install runs with --ignore-scripts: nothing the image needs has an install
# script (package.json "allowScripts" lists the ones a development install may run:
# the embedded PostgreSQL's binaries and @swc/core, for the tests; the build compiles
# with tsc).

# Build: compile TypeScript with the dev dependencies. Every workspace builds (the app's
# dist/ names @safe-retries/dev-postgres in a dynamic import that production never runs).
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/idempotency/package.json ./packages/idempotency/
COPY packages/dev-postgres/package.json ./packages/dev-postgres/
COPY packages/card-network-simulator/package.json ./packages/card-network-simulator/
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.base.json tsconfig.json tsconfig.build.json ./
COPY packages ./packages
COPY src ./src
COPY migrations ./migrations
RUN npm run build

# Production dependencies only. npm installs a workspace whose package.json is present even
# with --omit=dev, so the development tools' workspaces are not copied here: the development
# PostgreSQL (packages/dev-postgres: embedded-postgres and its binaries) and the card network
# simulator (packages/card-network-simulator). The image runs with NODE_ENV=production, which
# refuses to start without DATABASE_URL and CARD_NETWORK_URL, and only without them would the
# app load either. --omit=optional leaves out the optional dependencies of what remains.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/idempotency/package.json ./packages/idempotency/
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force

# Run: dist/, the library workspace (node_modules/safe-retries links to it) and production
# dependencies, as the unprivileged node user.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/packages/idempotency/package.json ./packages/idempotency/
COPY --from=build /app/packages/idempotency/dist ./packages/idempotency/dist
USER node
EXPOSE 3000
# Also in the image: `node dist/src/cli/migration.js run`, `node dist/src/cli/client-create.js <name>`
# (and client-rotate.js <name>, client-keys.js <name>, client-revoke.js <name> <prefix or id>).
CMD ["node", "dist/src/main.js"]
