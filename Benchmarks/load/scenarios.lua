-- The benchmark scenarios, as flows of HTTP requests, for Gatehouse and for the peer (django-allauth headless).
-- Loaded by driver.lua. Each scenario has new_flow(ctx), called before each flow, and steps: each step's
-- request(ctx) returns method, path, headers, body, and its check(ctx, status, body) returns true (next step),
-- "again" (send this step again: the code is not in the mailbox yet) or false, reason (the flow failed).
--
-- Users for login and sign-in are made beforehand by run.py: bench-user-K@example.com, K < BENCH_USERS, with
-- PASSWORD. Tokens for refresh and profile reads come from BENCH_TOKENS (one per line). Sign-ups make new
-- addresses from BENCH_TAG, the thread and a counter.

local PASSWORD = "correct horse battery staple"
local GH_APP = "/api/client/v2.0/app/bench"
local GH_AUTH = "/api/client/v2.0"
local GH_NATIVE = "/native/bench"
local CLIENT_ID = "bench-client"
local PEER = "/_allauth/app/v1"

local json_headers = { ["Content-Type"] = "application/json" }
local form_headers = { ["Content-Type"] = "application/x-www-form-urlencoded" }

local function urlencode(s)
    return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

local function form(fields)
    local parts = {}
    for _, kv in ipairs(fields) do table.insert(parts, kv[1] .. "=" .. urlencode(kv[2])) end
    return table.concat(parts, "&")
end

local function existing_user(ctx)
    -- spread the threads over the users, and move each thread on every flow
    ctx.email = string.format("bench-user-%d@example.com", (ctx.thread * 7 + ctx.n) % ctx.users)
end

local function new_address(ctx)
    ctx.email = string.format("%s-%d-%d@example.com", ctx.tag, ctx.thread, ctx.n)
end

local function pick_token(ctx)
    local t = ctx.tokens
    if #t == 0 then error("BENCH_TOKENS is required for this scenario") end
    ctx.token = t[(ctx.thread + ctx.n * 13) % #t + 1]
end

local function expect(...)
    local wanted = { ... }
    return function(ctx, status, body)
        for _, w in ipairs(wanted) do
            if status == w then return true end
        end
        return false, "expected HTTP " .. table.concat(wanted, "/")
    end
end

-- expect a status and a field in the JSON answer, kept in ctx[into]
local function expect_field(status, pattern, into)
    return function(ctx, got, body)
        if got ~= status then return false, "expected HTTP " .. status end
        local value = body:match(pattern)
        if not value then return false, "no " .. into .. " in the answer" end
        ctx[into] = value
        return true
    end
end

-- poll the dev mailbox until the newest email to ctx.email holds a code
local function mailbox_code(pattern)
    return {
        request = function(ctx) return "GET", "/_dev/mailbox?to=" .. urlencode(ctx.email), nil, nil end,
        check = function(ctx, status, body)
            if status ~= 200 then return false, "mailbox answered " .. status end
            local code = body:match(pattern)
            if not code then
                ctx.polls = (ctx.polls or 0) + 1
                if ctx.polls > 200 then return false, "no code in the mailbox" end
                return "again"
            end
            ctx.polls = 0
            ctx.code = code
            return true
        end,
    }
end

local CT = '"continuation_token":"([^"]+)"'

local gatehouse = {
    -- The HTTP floor: what one request costs the server with no work of its own behind it (no database, no
    -- token). Every other scenario's figures are also read as a fraction of this one, measured in the same run.
    ["healthz"] = {
        new_flow = function(ctx) end,
        steps = { {
            request = function(ctx) return "GET", "/healthz", nil, nil end,
            check = expect(200),
        } },
    },
    ["register"] = {
        new_flow = new_address,
        steps = { {
            request = function(ctx)
                return "POST", GH_APP .. "/auth/providers/local-userpass/register", json_headers,
                    string.format('{"email":"%s","password":"%s"}', ctx.email, PASSWORD)
            end,
            check = expect(201),
        } },
    },
    ["login"] = {
        new_flow = existing_user,
        steps = { {
            request = function(ctx)
                return "POST", GH_APP .. "/auth/providers/local-userpass/login", json_headers,
                    string.format('{"username":"%s","password":"%s"}', ctx.email, PASSWORD)
            end,
            check = expect_field(200, '"refresh_token":"([^"]+)"', "refresh"),
        } },
    },
    ["refresh"] = {
        new_flow = pick_token,
        steps = { {
            request = function(ctx)
                return "POST", GH_AUTH .. "/auth/session", { ["Authorization"] = "Bearer " .. ctx.token }, nil
            end,
            check = expect_field(201, '"access_token":"([^"]+)"', "access"),
        } },
    },
    ["profile"] = {
        new_flow = pick_token,
        steps = { {
            request = function(ctx)
                return "GET", GH_AUTH .. "/auth/profile", { ["Authorization"] = "Bearer " .. ctx.token }, nil
            end,
            check = expect_field(200, '"user_id":"([^"]+)"', "user_id"),
        } },
    },
    ["native-signin"] = {
        new_flow = existing_user,
        steps = {
            {
                request = function(ctx)
                    return "POST", GH_NATIVE .. "/oauth2/v2.0/initiate", form_headers, form {
                        { "client_id", CLIENT_ID }, { "username", ctx.email },
                        { "challenge_type", "oob password redirect" } }
                end,
                check = expect_field(200, CT, "ct"),
            },
            {
                request = function(ctx)
                    return "POST", GH_NATIVE .. "/oauth2/v2.0/challenge", form_headers, form {
                        { "client_id", CLIENT_ID }, { "continuation_token", ctx.ct },
                        { "challenge_type", "oob password redirect" } }
                end,
                check = function(ctx, status, body)
                    if status ~= 200 then return false, "expected HTTP 200" end
                    if not body:find('"challenge_type":"password"', 1, true) then
                        return false, "expected a password challenge"
                    end
                    ctx.ct = body:match(CT)
                    return ctx.ct ~= nil, "no continuation_token"
                end,
            },
            {
                request = function(ctx)
                    return "POST", GH_NATIVE .. "/oauth2/v2.0/token", form_headers, form {
                        { "client_id", CLIENT_ID }, { "grant_type", "password" },
                        { "continuation_token", ctx.ct }, { "username", ctx.email }, { "password", PASSWORD },
                        { "scope", "openid profile offline_access" }, { "client_info", "true" } }
                end,
                check = expect_field(200, '"access_token":"([^"]+)"', "access"),
            },
        },
    },
    ["native-signup"] = {
        new_flow = new_address,
        steps = {
            {
                request = function(ctx)
                    return "POST", GH_NATIVE .. "/signup/v1.0/start", form_headers, form {
                        { "client_id", CLIENT_ID }, { "username", ctx.email }, { "password", PASSWORD },
                        { "challenge_type", "oob password redirect" } }
                end,
                check = expect_field(200, CT, "ct"),
            },
            {
                request = function(ctx)
                    return "POST", GH_NATIVE .. "/signup/v1.0/challenge", form_headers, form {
                        { "client_id", CLIENT_ID }, { "continuation_token", ctx.ct },
                        { "challenge_type", "oob password redirect" } }
                end,
                check = function(ctx, status, body)
                    if status ~= 200 then return false, "expected HTTP 200" end
                    if not body:find('"challenge_type":"oob"', 1, true) then return false, "expected oob" end
                    ctx.ct = body:match(CT)
                    return ctx.ct ~= nil, "no continuation_token"
                end,
            },
            mailbox_code('"text"%s*:%s*"[^"]-code is:%D*(%d+)'),
            {
                request = function(ctx)
                    return "POST", GH_NATIVE .. "/signup/v1.0/continue", form_headers, form {
                        { "client_id", CLIENT_ID }, { "continuation_token", ctx.ct },
                        { "grant_type", "oob" }, { "oob", ctx.code } }
                end,
                check = expect_field(200, CT, "ct"),
            },
            {
                request = function(ctx)
                    return "POST", GH_NATIVE .. "/oauth2/v2.0/token", form_headers, form {
                        { "client_id", CLIENT_ID }, { "grant_type", "continuation_token" },
                        { "continuation_token", ctx.ct }, { "username", ctx.email },
                        { "scope", "openid profile offline_access" }, { "client_info", "true" } }
                end,
                check = expect_field(200, '"access_token":"([^"]+)"', "access"),
            },
        },
    },
}

local function peer_login_step()
    return {
        request = function(ctx)
            return "POST", PEER .. "/auth/login", json_headers,
                string.format('{"email":"%s","password":"%s"}', ctx.email, PASSWORD)
        end,
        check = expect_field(200, '"refresh_token":%s*"([^"]+)"', "refresh"),
    }
end

local peer = {
    ["register"] = {
        new_flow = new_address,
        steps = { {
            request = function(ctx)
                return "POST", PEER .. "/auth/signup", json_headers,
                    string.format('{"email":"%s","password":"%s"}', ctx.email, PASSWORD)
            end,
            check = expect(200),
        } },
    },
    ["login"] = { new_flow = existing_user, steps = { peer_login_step() } },
    ["refresh"] = {
        new_flow = pick_token,
        steps = { {
            request = function(ctx)
                return "POST", PEER .. "/tokens/refresh", json_headers,
                    string.format('{"refresh_token":"%s"}', ctx.token)
            end,
            check = expect_field(200, '"access_token":%s*"([^"]+)"', "access"),
        } },
    },
    ["profile"] = {
        new_flow = pick_token,
        steps = { {
            request = function(ctx)
                return "GET", PEER .. "/auth/session", { ["Authorization"] = "Bearer " .. ctx.token }, nil
            end,
            check = expect_field(200, '"email":%s*"([^"]+)"', "profile_email"),
        } },
    },
    -- allauth has no multi-step password sign-in: its app client signs in with one POST, the same as login.
    ["native-signin"] = { new_flow = existing_user, steps = { peer_login_step() } },
    -- Sign-up with a password whose address is proved with an emailed code (ACCOUNT_EMAIL_VERIFICATION_BY_CODE):
    -- the sign-up answers 401 with a pending verify_email flow and a session token; the code verifies it and
    -- signs the user in (access and refresh tokens).
    ["native-signup"] = {
        new_flow = new_address,
        steps = {
            {
                request = function(ctx)
                    return "POST", PEER .. "/auth/signup", json_headers,
                        string.format('{"email":"%s","password":"%s"}', ctx.email, PASSWORD)
                end,
                check = function(ctx, status, body)
                    if status ~= 401 or not body:find('"verify_email"', 1, true) then
                        return false, "expected HTTP 401 with a pending verify_email flow"
                    end
                    ctx.session = body:match('"session_token":%s*"([^"]+)"')
                    return ctx.session ~= nil, "no session_token"
                end,
            },
            mailbox_code("\\n([A-Z0-9][A-Z0-9][A-Z0-9][A-Z0-9]%-[A-Z0-9][A-Z0-9][A-Z0-9][A-Z0-9])\\n"),
            {
                request = function(ctx)
                    return "POST", PEER .. "/auth/email/verify",
                        { ["Content-Type"] = "application/json", ["X-Session-Token"] = ctx.session },
                        string.format('{"key":"%s"}', ctx.code)
                end,
                check = expect_field(200, '"access_token":%s*"([^"]+)"', "access"),
            },
        },
    },
}

return { gatehouse = gatehouse, peer = peer }
