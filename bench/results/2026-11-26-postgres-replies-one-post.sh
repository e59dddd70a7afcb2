# replies.sh ROOT LABEL PORT: PG, one post, 50 connections POSTing replies for 10 s (3 runs)
ROOT=$1; LABEL=$2; PORT=$3; DB=rb_$LABEL
dropdb -h 127.0.0.1 -U postgres --force --if-exists $DB; createdb -h 127.0.0.1 -U postgres $DB
cd $ROOT
PORT=$PORT HOST=127.0.0.1 DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB RATE_LIMIT=off LOG_LEVEL=warn PASSWORD_HASH_MEMORY_KIB=64 taskset -c 0 node --max-semi-space-size=8 --heap-growing-percent=50 dist/src/server.js &
PID=$!
for i in $(seq 50); do curl -sf localhost:$PORT/health >/dev/null && break; sleep 0.2; done
curl -s -X POST localhost:$PORT/users -H 'content-type: application/json' -d '{"username":"alice","password":"password123"}' >/dev/null
TOKEN=$(curl -s -X POST localhost:$PORT/tokens -H 'content-type: application/json' -d '{"username":"alice","password":"password123"}' | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).token))')
curl -s -o /dev/null -X POST localhost:$PORT/users/1/posts -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' -d '{"title":"Hot","content":"A post everyone replies to"}'
cat > /tmp/prof/reply.lua <<LUA
wrk.method = "POST"
wrk.body = '{"content":"a reply under load"}'
wrk.headers["content-type"] = "application/json"
wrk.headers["authorization"] = "Bearer $TOKEN"
LUA
taskset -c 1 wrk -t1 -c50 -d3s -s /tmp/prof/reply.lua http://127.0.0.1:$PORT/posts/1/replies >/dev/null
for r in 1 2 3; do echo "$LABEL run $r: $(taskset -c 1 wrk -t1 -c50 -d10s --latency -s /tmp/prof/reply.lua http://127.0.0.1:$PORT/posts/1/replies | grep -E 'Requests/sec|99%|Non-2xx' | tr -s ' ' | tr '\n' ' ')"; done
curl -s localhost:$PORT/posts/1 | head -c 200; echo
kill $PID; wait $PID 2>/dev/null
dropdb -h 127.0.0.1 -U postgres --force $DB
