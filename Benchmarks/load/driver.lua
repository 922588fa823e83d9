-- wrk script for every benchmark scenario, Gatehouse's and the peer's.
--
--   BENCH_SERVER=gatehouse|peer BENCH_SCENARIO=NAME [BENCH_RATE=FLOWS_PER_S] [BENCH_TOKENS=FILE] \
--   BENCH_TAG=UNIQUE BENCH_USERS=N wrk -t C -c C -d 20s --timeout 10s -s Benchmarks/load/driver.lua URL
--
-- Scenarios are flows of one or more HTTP requests (scenarios.lua): each wrk thread drives exactly one
-- connection (run wrk with -t equal to -c), so the thread's Lua state is that connection's state and a flow's
-- steps can carry values from one answer to the next request (a continuation token, an emailed code).
-- Every answer is checked; a flow whose answer is not the expected one counts as failed and starts again.
--
-- Measured here, besides wrk's own per-request latency: each flow's latency, from sending its first request to
-- receiving its last answer, with CLOCK_MONOTONIC through LuaJIT's FFI. done() prints one line
-- `BENCH_RESULT {json}` that Benchmarks/run.py reads.
--
-- Fixed rate (BENCH_RATE, flows per second over all connections): each connection is scheduled to start a
-- flow every C/BENCH_RATE seconds; wrk's delay() hook holds the next flow until its time (1 ms resolution).
-- A flow that starts late (the server was slower than the schedule) is timed from when it was sent, not from
-- when it was due: the fixed-rate figures are only meaningful while the achieved rate equals the asked one,
-- which run.py checks and records.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local function now_us()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local scenarios = dofile(here .. "scenarios.lua")

local server = os.getenv("BENCH_SERVER") or error("BENCH_SERVER is required")
local scenario_name = os.getenv("BENCH_SCENARIO") or error("BENCH_SCENARIO is required")
local scenario = (scenarios[server] or error("unknown server " .. server))[scenario_name]
    or error("unknown scenario " .. scenario_name .. " for " .. server)

-- main thread: number the threads ---------------------------------------------------------------------------
local threads = {}
local next_id = 0
function setup(thread)
    thread:set("thread_id", next_id)
    next_id = next_id + 1
    table.insert(threads, thread)
end

-- per thread (= per connection) -----------------------------------------------------------------------------
local ctx                  -- the flow's values, shared by its steps
local step                 -- index of the step whose answer is awaited
local flow_start           -- when the flow's first request was sent (µs)
local due                  -- when the next flow is due (fixed rate), µs
local interval             -- µs between flows of this connection (fixed rate), or nil
local tokens = {}
flow_latencies = {}        -- µs, one per completed flow (read by done())
flows_ok = 0
flows_failed = 0
steps_sent = 0
first_failure = ""

local function read_lines(path)
    local lines = {}
    for line in io.lines(path) do
        if line ~= "" then table.insert(lines, line) end
    end
    return lines
end

function init(args)
    local tag = os.getenv("BENCH_TAG") or tostring(os.time())
    local users = tonumber(os.getenv("BENCH_USERS") or "1")
    local token_file = os.getenv("BENCH_TOKENS")
    if token_file and token_file ~= "" then tokens = read_lines(token_file) end
    local rate = tonumber(os.getenv("BENCH_RATE") or "0")
    local connections = tonumber(os.getenv("BENCH_CONNECTIONS") or "1")
    if rate > 0 then
        interval = 1000000 * connections / rate
        -- the first flow goes at once (wrk sends every connection's first request at start); the next ones
        -- follow the schedule, spread over one interval across the connections
        due = now_us() + interval * (1 + thread_id / connections)
    end
    ctx = { thread = thread_id, tag = tag, users = users, tokens = tokens, n = 0 }
    scenario.new_flow(ctx)
    step = 1
end

local function begin_flow()
    ctx.n = ctx.n + 1
    scenario.new_flow(ctx)
    step = 1
end

function delay()
    if step ~= 1 or not interval then return 0 end
    local wait = due - now_us()
    due = due + interval
    if wait <= 0 then return 0 end
    return math.floor(wait / 1000)
end

function request()
    if step == 1 then flow_start = now_us() end
    steps_sent = steps_sent + 1
    local method, path, headers, body = scenario.steps[step].request(ctx)
    return wrk.format(method, path, headers, body)
end

function response(status, headers, body)
    local s = scenario.steps[step]
    local outcome, why = s.check(ctx, status, body)
    if outcome == "again" then
        return -- repeat this step (polling the mailbox until the code is there)
    end
    if not outcome then
        flows_failed = flows_failed + 1
        if first_failure == "" then
            first_failure = string.format("step %d: HTTP %d %s %s", step, status, why or "",
                (body or ""):sub(1, 200))
        end
        begin_flow()
        return
    end
    if step < #scenario.steps then
        step = step + 1
        return
    end
    table.insert(flow_latencies, now_us() - flow_start)
    flows_ok = flows_ok + 1
    begin_flow()
end

-- main thread: collect ----------------------------------------------------------------------------------------
local function percentile(sorted, p)
    if #sorted == 0 then return nil end
    local i = math.max(1, math.ceil(#sorted * p / 100))
    return sorted[i]
end

function done(summary, latency, requests)
    local all = {}
    local ok, failed, sent = 0, 0, 0
    local failure = ""
    for _, t in ipairs(threads) do
        for _, v in ipairs(t:get("flow_latencies")) do table.insert(all, v) end
        ok = ok + t:get("flows_ok")
        failed = failed + t:get("flows_failed")
        sent = sent + t:get("steps_sent")
        if failure == "" then failure = t:get("first_failure") end
    end
    table.sort(all)
    local function ms(v) return v and string.format("%.3f", v / 1000) or "null" end
    local e = summary.errors
    io.write(string.format(
        'BENCH_RESULT {"duration_s":%.3f,"requests":%d,"flows_ok":%d,"flows_failed":%d,' ..
        '"flow_p50_ms":%s,"flow_p90_ms":%s,"flow_p99_ms":%s,"flow_max_ms":%s,' ..
        '"request_p50_ms":%s,"request_p90_ms":%s,"request_p99_ms":%s,' ..
        '"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},"first_failure":"%s"}\n',
        summary.duration / 1e6, summary.requests, ok, failed,
        ms(percentile(all, 50)), ms(percentile(all, 90)), ms(percentile(all, 99)), ms(all[#all]),
        ms(latency:percentile(50)), ms(latency:percentile(90)), ms(latency:percentile(99)),
        e.connect, e.read, e.write, e.timeout,
        failure:gsub('[%c"\\]', " ")))
end
