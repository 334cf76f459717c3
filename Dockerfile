# Multi-stage image with all three roles (the config server also serves the dashboard at /); the command picks one:
#   node dist/apps/config/src/main.js | dist/apps/shard/src/main.js | dist/apps/router/src/main.js
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The dashboard is an npm workspace: npm ci needs its manifest.
COPY apps/dashboard/package.json apps/dashboard/
RUN npm ci
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production TESSERA_HOST=0.0.0.0
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
HEALTHCHECK --interval=5s --timeout=3s --retries=20 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.TESSERA_PORT||7070)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "--enable-source-maps"]
CMD ["dist/apps/router/src/main.js"]
