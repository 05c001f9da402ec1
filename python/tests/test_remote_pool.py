"""Which endpoint takes each request (remote/pool.py), with stand-in endpoints."""

import asyncio
import time

import newrllama4 as nl
from newrllama4.remote.dialects import VLLM
from newrllama4.remote import EndpointPool


# -- spreading requests ------------------------------------------------------------------------


def endpoints(n):
    return [nl.remote.Endpoint(f"http://e{i}/v1", VLLM()) for i in range(n)]


def test_the_endpoint_with_fewest_requests_in_flight_goes_first():
    async def scenario():
        a, b = endpoints(2)
        pool = EndpointPool([a, b], per_endpoint=2, backoff=1.0)
        taken = [await pool.acquire() for _ in range(3)]
        assert taken == [a, b, a]
        pool.release(a)
        assert await pool.acquire(avoid=a) == b  # a retry leaves the endpoint that failed it
    asyncio.run(scenario())


def test_a_retry_waits_for_a_busy_endpoint_rather_than_go_back_to_the_one_that_failed():
    async def scenario():
        failing, busy = endpoints(2)
        pool = EndpointPool([failing, busy], per_endpoint=1, backoff=0.0)
        assert [await pool.acquire(), await pool.acquire()] == [failing, busy]
        pool.release(failing, failed=True)  # rests 0 s: awake at once
        asyncio.get_running_loop().call_later(0.2, pool.release, busy)
        started = time.monotonic()
        assert await pool.acquire(avoid=failing) == busy
        assert time.monotonic() - started >= 0.15
        assert await pool.acquire() == failing  # a first attempt may still go there
    asyncio.run(scenario())


def test_an_endpoint_rests_after_a_failure_and_requests_wait_for_it():
    async def scenario():
        (only,) = endpoints(1)
        pool = EndpointPool([only], per_endpoint=4, backoff=0.3)
        await pool.acquire()
        await pool.acquire()
        pool.release(only, failed=True)
        pool.release(only, failed=True)  # in flight together: one failure, one rest
        started = time.monotonic()
        assert await pool.acquire() == only
        assert 0.25 <= time.monotonic() - started < 2
    asyncio.run(scenario())


# vLLM's shapes (its docs and OpenAPI): /tokenize answers {"count", "max_model_len", "tokens"};
# a completion's choice has "prompt_logprobs", None for the first token, then for each prompt
# token a dict from token ids (as strings) to {"logprob", "rank", "decoded_token"}
# the fake's tokenizer; it spells "nope" alike with and without the space
