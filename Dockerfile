# ratelimitd's image: a static binary on distroless, running as 65534.
#
#   make image                        # docker or podman, version from git
#   docker build --build-arg VERSION=v1.2.3 -t ratelimitd:v1.2.3 .
#
# Drop-in for envoyproxy/ratelimit: the binary is also at /bin/ratelimit,
# the command Envoy Gateway's and most manifests start it with.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/bin/ratelimitd ./cmd/ratelimitd \
 && ln -s ratelimitd /out/bin/ratelimit \
 && /out/bin/ratelimitd --version

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bin/ /bin/
# nobody:nogroup, the uid Envoy Gateway runs the rate limit service as.
USER 65534:65534
# gRPC, HTTP (/healthcheck, /json), debug (/metrics, /rlconfig, pprof).
EXPOSE 8081 8080 6070
ENTRYPOINT ["/bin/ratelimitd"]
