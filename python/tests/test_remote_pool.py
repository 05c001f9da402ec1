"""Which endpoint takes each request (remote/pool.py), with stand-in endpoints."""

import asyncio
import time

import pytest

import newrllama4 as nl
from newrllama4.remote.dialects import VLLM
from newrllama4.remote import EndpointPool
from newrllama4.remote.pool import Unreachable


# -- spreading requests ------------------------------------------------------------------------


def endpoints(n):
    return [nl.remote.Endpoint(f"http://e{i}/v1", VLLM()) for i in range(n)]


def test_the_endpoint_with_fewest_requests_in_flight_goes_first():
    async def scenario():
        a, b = endpoints(2)
        pool = EndpointPool([a, b], per_endpoint=2, backoff=1.0, give_up_after=3)
        taken = [await pool.acquire() for _ in range(3)]
        assert taken == [a, b, a]
        pool.release(a)
        assert await pool.acquire(avoid=a) == b  # a retry leaves the endpoint that failed it
    asyncio.run(scenario())


def test_a_retry_waits_for_a_busy_endpoint_rather_than_go_back_to_the_one_that_failed():
    async def scenario():
        failing, busy = endpoints(2)
        pool = EndpointPool([failing, busy], per_endpoint=1, backoff=0.0, give_up_after=3)
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
        pool = EndpointPool([only], per_endpoint=4, backoff=0.3, give_up_after=3)
        await pool.acquire()
        await pool.acquire()
        pool.release(only, failed=True)
        pool.release(only, failed=True)  # in flight together: one failure, one rest
        started = time.monotonic()
        assert await pool.acquire() == only
        assert 0.25 <= time.monotonic() - started < 2
    asyncio.run(scenario())


# -- servers that are gone -----------------------------------------------------------------------


async def refuse(pool, endpoint, rounds, avoid=None):
    """`rounds` requests to `endpoint`, each refused after the rest of the one before."""
    for _ in range(rounds):
        assert await pool.acquire(avoid=avoid) is endpoint
        pool.release(endpoint, failed=True, refused=True)


def test_once_every_endpoint_refused_enough_times_in_a_row_the_pool_gives_up():
    async def scenario():
        a, b = endpoints(2)
        pool = EndpointPool([a, b], per_endpoint=1, backoff=0.0, give_up_after=2)
        await refuse(pool, a, 2, avoid=b)
        await refuse(pool, b, 1, avoid=a)
        assert await pool.acquire(avoid=a) is b  # b may still answer
        pool.release(b, failed=True, refused=True)
        with pytest.raises(Unreachable) as gone:
            await pool.acquire()
        assert (gone.value.endpoint, gone.value.rounds) == (b, 2)
    asyncio.run(scenario())


@pytest.mark.parametrize("break_the_run", [{"failed": False}, {"failed": True, "refused": False}],
                         ids=["an answer", "another failure"])
def test_a_run_of_refusals_is_broken_by_an_answer_or_another_failure(break_the_run):
    async def scenario():
        (only,) = endpoints(1)
        pool = EndpointPool([only], per_endpoint=1, backoff=0.0, give_up_after=2)
        await refuse(pool, only, 1)
        assert await pool.acquire() is only
        pool.release(only, **break_the_run)
        await refuse(pool, only, 1)
        assert await pool.acquire() is only  # one refusal since the run broke: not given up
    asyncio.run(scenario())


def test_requests_waiting_for_a_resting_endpoint_give_up_at_once_when_it_is_gone():
    async def scenario():
        (only,) = endpoints(1)
        pool = EndpointPool([only], per_endpoint=1, backoff=10.0, give_up_after=1)
        await pool.acquire()
        waiting = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0.05)
        started = time.monotonic()
        pool.release(only, failed=True, refused=True)  # it now rests 10 s
        with pytest.raises(Unreachable):
            await waiting
        assert time.monotonic() - started < 1
    asyncio.run(scenario())


# vLLM's shapes (its docs and OpenAPI): /tokenize answers {"count", "max_model_len", "tokens"};
# a completion's choice has "prompt_logprobs", None for the first token, then for each prompt
# token a dict from token ids (as strings) to {"logprob", "rank", "decoded_token"}
# the fake's tokenizer; it spells "nope" alike with and without the space
