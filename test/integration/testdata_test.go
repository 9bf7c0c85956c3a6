package integration

// itConfig exercises every config feature the service issue names.
const itConfig = `domain: it
descriptors:
  - key: generic_key
    value: fixed
    rate_limit: {unit: day, requests_per_unit: 3, name: fixed3}
  - key: generic_key
    value: bucket
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 4}
  - key: generic_key
    value: unlimited
    rate_limit: {unlimited: true}
  - key: generic_key
    value: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: generic_key
    value: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: generic_key
    value: shared
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: generic_key
    value: hits
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: a
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: a_b
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: remote_address
    rate_limit: {unit: day, requests_per_unit: 1, name: per_ip}
  - key: user
    value: "vip-*"
    rate_limit: {unit: day, requests_per_unit: 5, name: vip, replaces: [{name: per_ip}]}
  - key: path
    value: "/api/*/items"
    descriptors:
      - key: method
        value: GET
        rate_limit: {unit: day, requests_per_unit: 2}
      - key: method
        rate_limit: {unit: day, requests_per_unit: 1}
  - key: global
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: alg
    value: fixed_window
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: fixed_window}
  - key: alg
    value: sliding_log
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: sliding_log}
  - key: alg
    value: token_bucket
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
`
