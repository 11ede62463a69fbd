"""Entity and relation memory: built at sleep time from what was said, merged per scope,
valid while its memory is, reached by the entity route, and gone with an erasure."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import redis as redis_lib
from lifecycle_support import DAY, SCOPE, T0, Clock, current, ingest, memory, say, store
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.adapters.redis.erase import RedisHotStore
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import Entity, EntityAlias, EntityMention, Memory, Relation, Scope
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.entities.spot import alias_key, spot, without_people
from sleepmem.pipelines.lifecycle.erase import erase_memory, erase_scope
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.lifecycle.reconsolidate import create_job, run_job
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.read.entities import entity_route

BOB = Scope(tenant="acme", agent="bot", user="bob")
MIN = timedelta(minutes=1)


def entities(engine: Engine, scope: Scope = SCOPE) -> dict[str, Entity]:
    with Session(engine) as s:
        rows = s.exec(select(Entity).where(col(Entity.scope_key) == scope.owner.key))
        return {e.name: e for e in rows}


def aliases(engine: Engine, entity: Entity) -> set[str]:
    with Session(engine) as s:
        return set(s.exec(select(EntityAlias.alias)
                          .where(col(EntityAlias.entity_id) == entity.id)))


def relations(engine: Engine) -> list[tuple[str, str, str, str]]:
    """(subject name, relation, object name, status) of every relation row."""
    with Session(engine) as s:
        names = {e.id: e.name for e in s.exec(select(Entity))}
        return sorted((names[r.subject_id], r.relation, names[r.object_id], r.status)
                      for r in s.exec(select(Relation)))


def said(engine: Engine, words: str) -> Memory:
    (mem,) = [m for m in current(engine, SCOPE.owner.key) if words in m.statement]
    return mem


class TestSpottingNames:
    def test_capitalised_runs_are_names_and_the_preposition_tells_their_kind(self) -> None:
        names = spot(
            "Yesterday my cousin Ines flew from Buenos Aires to work at the Bank of Chile.")
        found = {s.name: s.kind for s in names if not s.initial}
        assert found == {"Ines": "person", "Buenos Aires": "place",
                         "Bank of Chile": "organisation"}
        # A sentence's first word is a name only if the scope knows it (linking decides).
        assert [s.name for s in names if s.initial] == ["Yesterday"]

    def test_an_appositive_role_is_kept_and_the_family_vocabulary_tells_pets(self) -> None:
        (pet,) = [s for s in spot("We finally adopted my dog Biscuit.") if not s.initial]
        assert (pet.name, pet.kind, pet.role) == ("Biscuit", "pet", "dog")

    def test_only_a_word_naming_a_relation_is_a_role(self) -> None:
        roles = {
            "I watched my favorite Star Wars movie again.": ("Star Wars", ""),
            "I packed my new Canon camera.": ("Canon", ""),
            "my old Honda Civic broke down": ("Honda Civic", ""),
            "I called my best friend Gina.": ("Gina", "friend"),
            "My neighbours Ana and Luis came over.": ("Ana", "neighbours"),
            "我同事小王住在北京": ("小王", "同事"),
        }
        for line, (name, role) in roles.items():
            first = spot(line)[0]
            assert (first.name, first.role) == (name, role), line
        # An adjective names no relation, so the name gets no person kind from it.
        (wars,) = spot("I watched my favorite Star Wars movie again.")
        assert wars.kind == "thing"

    def test_chinese_names_come_from_roles_and_places_from_the_verb_before_them(self) -> None:
        text = "我表姐的朋友阿珍搬到了成都。我哥哥志明住在杭州"
        found = {s.name: (s.kind, s.role) for s in spot(text)}
        assert found["志明"] == ("person", "哥哥")
        assert found["杭州"][0] == "place"

    def test_greetings_and_function_words_are_not_names_nor_the_start_of_one(self) -> None:
        lines = {
            "Hey Caroline! How did the adoption go?": ["Caroline"],
            "Thanks Mel, that means a lot.": ["Mel"],
            "Congrats Jon, you earned it!": ["Jon"],
            "Hi Deborah, Did you see the sunset?": ["Deborah"],
            "Can Pet Calendar track Max's walks too?": ["Pet Calendar", "Max"],
            "Could Nate pick me up?": ["Nate"],
            "Would you like some tea?": [],
            "Some Quick Tips for your garden:": ["Quick Tips"],
            "Oh wow, How are you?": [],
        }
        for line, names in lines.items():
            assert [s.name for s in spot(line)] == names, line
        # Addressed after a greeting, a name is mid-sentence: a name, not a sentence opener.
        (caroline,) = spot("Hey Caroline!")
        assert not caroline.initial

    def test_a_word_opening_a_list_item_opens_a_sentence(self) -> None:
        reply = ("Here are some tips:\n\n1. **Keep** it short\n- Make a list\n"
                 "* **Pack** light, then ask Nora.")
        openers = {s.name: s.initial for s in spot(reply)}
        # Markup before a word is no sentence: the word still opens one.
        assert openers == {"Keep": True, "Make": True, "Pack": True, "Nora": False}

    def test_a_full_stop_ends_a_name_unless_it_ends_an_abbreviation(self) -> None:
        assert [s.name for s in spot("We flew to Maui. Our hotel was nice.")] == ["Maui"]
        assert [s.name for s in spot("I met Dr. Smith in St. Louis.")] == [
            "Dr. Smith", "St. Louis"]
        assert [s.name for s in spot("He served in the U.S. Army.")] == ["U.S. Army"]

    def test_a_first_name_that_is_also_a_word_stays_a_name_mid_sentence(self) -> None:
        found = [s.name for s in spot("I met Will at the Bank of America in New York.")]
        assert found == ["Will", "Bank of America", "New York"]

    def test_chinese_pronouns_and_particles_are_in_no_name(self) -> None:
        lines = {
            "我们叫了外卖": [],  # 叫 as "to order"
            "明天早上叫醒我": [],  # 叫 as "to wake"
            "大家都叫他老王": [],
            "他从我这里拿走了": [],
            "我叫小美": ["小美"],
            "他名叫李雷。": ["李雷"],
            "我的猫叫团团": ["团团"],
            "阿珍搬到了成都。": ["成都"],
            "我到了上海了": ["上海"],
        }
        for line, names in lines.items():
            assert [s.name for s in spot(line)] == names, line

    def test_alias_keys_ignore_case_possessive_and_width(self) -> None:
        assert alias_key("Melanie's") == alias_key("MELANIE") == alias_key("Ｍｅｌａｎｉｅ")


class TestAQueryWithoutThePeopleItNames:
    def test_a_person_and_their_possessive_are_taken_out(self) -> None:
        assert without_people("What do Melanie's kids like?") == "What do kids like?"
        assert without_people("What is James' dog called?") == "What is dog called?"
        assert without_people("Where did Jon and Gina go camping?") == (
            "Where did and go camping?")

    def test_places_organisations_and_things_stay(self) -> None:
        for query in ("What did I buy at Costco last week?",
                      "Which museum did we visit in Paris?",
                      "What can Pet Calendar do?"):
            assert without_people(query) == query

    def test_a_query_that_is_only_a_name_is_kept_whole(self) -> None:
        assert without_people("Caroline") == "Caroline"

    def test_a_query_without_names_is_unchanged(self) -> None:
        for query in ("what do my kids like", "我上个月去了哪里？", "Where has she camped?"):
            assert without_people(query) == query


    def test_people_the_scope_knows_are_taken_out_in_chinese_with_their_possessive(
        self
    ) -> None:
        assert without_people("小美的孩子喜欢什么？", ["小美"]) == "孩子喜欢什么？"
        assert without_people("小美和小丽上周去哪里露营了？", ["小美", "小丽"]) == (
            "和上周去哪里露营了？")
        assert without_people("我妹妹小美住在哪里？", ["小美"]) == "我妹妹住在哪里？"

    def test_a_known_name_is_a_whole_word_in_english_and_merges_with_a_spotted_one(
        self
    ) -> None:
        assert without_people("What does Melanie paint?", ["Mel"]) == "What does paint?"
        assert without_people("what does mel's sister do?", ["Mel"]) == "what does sister do?"
        assert without_people("What did Mel buy for Mel's sister?", ["Mel"]) == (
            "What did buy for sister?")

class TestEntitiesMergePerScope:
    def test_a_short_form_a_first_name_and_a_full_name_are_one_entity(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("My friend Mel moved to Tokyo last year.", at=T0, session="s1"),
            say("I had dinner with Melanie Okafor and her kids.", at=T0 + DAY, session="s2"),
            say("We went hiking with Melanie's brother.", at=T0 + 2 * DAY, session="s3"),
        ])
        found = entities(engine)
        assert "Melanie Okafor" in found and not {"Mel", "Melanie"} & set(found)
        mel = found["Melanie Okafor"]
        assert {"mel", "melanie", "melanie okafor", "friend"} <= aliases(engine, mel)
        assert mel.kind == "person" and mel.mention_count == 3

    def test_each_scope_has_its_own_entities(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("My friend Mel moved to Tokyo last year.", at=T0),
            say("My neighbour Mel moved to Tokyo too.", at=T0, scope=BOB),
        ])
        assert entities(engine)["Mel"].id != entities(engine, BOB)["Mel"].id


class TestRelationsFollowTheirMemory:
    def test_a_superseded_memory_retires_its_relation_with_an_end_of_validity(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [say("I live in Lisbon.", at=T0)])
        ingest(redis, keys, engine, settings, ports, [say("I moved to Porto.", at=T0 + DAY)])
        assert ("user", "lives_in", "Lisbon", "superseded") in relations(engine)
        assert ("user", "lives_in", "Porto", "active") in relations(engine)
        with Session(engine) as s:
            (old,) = s.exec(select(Relation).where(col(Relation.status) == "superseded"))
            (mem,) = s.exec(select(Memory).where(col(Memory.id) == old.memory_id))
        # Invalidated, not deleted: it stays, with the validity of its memory.
        assert mem.status == "superseded" and old.valid_to == mem.valid_to == T0 + DAY
        assert old.provenance == mem.provenance

    def test_a_relation_between_two_names_reads_the_words_between_them(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("My friend Mel moved to Tokyo last year.", at=T0)])
        assert {("user", "friend", "Mel", "active"), ("Mel", "moved_to", "Tokyo", "active")} \
            <= set(relations(engine))

    def test_a_forget_request_takes_the_relation_and_the_name_with_the_memory(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("My therapist Dr Ravensworth moved to Glasgow.", at=T0),
            say("I live in Lisbon.", at=T0 + MIN),
        ])
        assert "Ravensworth" in " ".join(entities(engine))
        ingest(redis, keys, engine, settings, ports, [
            say("Please forget everything about my therapist.", at=T0 + DAY)])
        assert not [n for n in entities(engine) if "Ravensworth" in n or n == "Glasgow"]
        assert [r for r in relations(engine) if r[2] == "Lisbon"]


    def test_a_forget_request_takes_a_name_from_the_turn_it_cuts_out_of_a_memory(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        # The second turn is remembered with the first as its context: the request cuts
        # that turn out of it, and the names only that turn gave must go too.
        ingest(redis, keys, engine, settings, ports, [
            say("I go to a gambling recovery group, it meets at St Jude's parish hall.", at=T0),
            say("Learning to make fresh pasta, ravioli is next on the list.", at=T0 + MIN),
        ])
        [pasta] = [m for m in current(engine, SCOPE.owner.key) if "pasta" in m.statement]
        assert "St Jude" in pasta.statement and "St Jude" in entities(engine)
        ingest(redis, keys, engine, settings, ports, [
            say("Can you scrub everything about my recovery group?", at=T0 + DAY)])
        assert "St Jude" not in entities(engine)
        assert [m for m in current(engine, SCOPE.owner.key) if "pasta" in m.statement]


    def test_the_sweep_expires_the_relation_then_deletes_it_with_its_memory(
        self, engine: Engine, ports: Ports, clock: Clock,
    ) -> None:
        (m,) = store(engine, ports, memory("My dentist Dr Okonkwo moved to Leeds.", type="task",
                                           expires_at=T0 + DAY))
        with Session(engine) as s:
            entity_store.record_versions(s, scope_key=m.scope_key, new=[m], retired=[],
                                         now=T0)
            s.commit()
        assert ("Okonkwo", "moved_to", "Leeds", "active") in [
            (a.removeprefix("Dr "), r, b, st) for a, r, b, st in relations(engine)]
        settings = Settings(_env_file=None, embedder="hashing", delete_after_s=30 * 86400.0)
        clock.advance(2 * DAY)
        sweep(engine=engine, ports=ports, settings=settings)
        with Session(engine) as s:
            (rel,) = s.exec(select(Relation).where(col(Relation.relation) == "moved_to"))
        assert rel.status == "expired" and rel.valid_to == T0 + 2 * DAY
        clock.advance(31 * DAY)
        assert sweep(engine=engine, ports=ports, settings=settings).deleted == 1
        assert relations(engine) == [] and entities(engine) == {}


class TestTheEntityRoute:
    def world(self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
              ports: Ports) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("My friend Mel moved to Tokyo last year.", at=T0, session="s1"),
            say("Mel works as a nurse at a children's hospital.", at=T0 + DAY, session="s2"),
            say("I bought a red bicycle.", at=T0 + 2 * DAY, session="s3"),
            say("My cousin Jonas moved to Tokyo as well.", at=T0, scope=BOB),
        ])

    def test_a_memory_is_found_through_a_place_one_relation_away(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        self.world(redis, keys, engine, settings, ports)
        hits = entity_route(engine=engine, scope=SCOPE, limit=10, now=ports.clock(),
                            query="What does the person who moved to Tokyo do for a living?")
        ids = [h.id for h in hits]
        # The question never names Mel: Tokyo does, and Mel moved there.
        assert said(engine, "nurse").id in ids
        assert said(engine, "moved to Tokyo").id == ids[0]
        assert said(engine, "bicycle").id not in ids
        assert all(0.0 <= h.score <= 1.0 for h in hits) and hits[0].score == 1.0

    def test_names_link_by_alias_case_and_possessive_and_a_role_links_too(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        self.world(redis, keys, engine, settings, ports)
        nurse = said(engine, "nurse").id
        for query in ("Where is MEL's job?", "what does my friend do?"):
            hits = entity_route(engine=engine, scope=SCOPE, query=query, limit=5,
                                now=ports.clock())
            assert nurse in [h.id for h in hits], query

    def test_another_users_entities_and_retired_memories_are_not_reached(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        self.world(redis, keys, engine, settings, ports)
        ingest(redis, keys, engine, settings, ports, [say("I live in Lisbon.", at=T0)])
        lisbon = said(engine, "Lisbon").id
        ingest(redis, keys, engine, settings, ports, [say("I moved to Porto.", at=T0 + DAY)])
        hits = entity_route(engine=engine, scope=SCOPE, query="Jonas, Tokyo, Lisbon", limit=20,
                            now=ports.clock())
        with Session(engine) as s:
            users = {m.user for m in s.exec(select(Memory).where(
                col(Memory.id).in_([h.id for h in hits])))}
        assert users == {"ann"} and lisbon not in [h.id for h in hits]

    def test_a_query_naming_nothing_known_reaches_nothing(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        self.world(redis, keys, engine, settings, ports)
        assert entity_route(engine=engine, scope=SCOPE, query="What about Reykjavik?",
                            limit=10, now=ports.clock()) == []

    def test_a_request_opening_with_a_function_word_links_to_no_entity(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("Can Pet Calendar track my dog's walks?", at=T0, session="s1"),
            say("Hey Mel! Would you like to come hiking on Sunday?", at=T0 + DAY,
                session="s2"),
            say("Some Ideas for the garden: tomatoes and basil.", at=T0 + 2 * DAY,
                session="s3"),
        ])
        found = entities(engine)
        assert {"Pet Calendar", "Mel"} <= set(found)
        assert not {"Can", "Can Pet Calendar", "Hey Mel", "Would", "Some Ideas"} & set(found)
        for request in ("Can you suggest some accessories for my camera?",
                        "Would you recommend a hotel in Miami?",
                        "How can I stay in touch with some colleagues?"):
            assert entity_route(engine=engine, scope=SCOPE, query=request, limit=10,
                                now=ports.clock()) == [], request
        hits = entity_route(engine=engine, scope=SCOPE, query="What can Pet Calendar do?",
                            limit=10, now=ports.clock())
        assert hits[0].id == said(engine, "Pet Calendar").id

    def test_chinese_names_link_too(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("我妹妹小美住在杭州。", at=T0, session="s1"),
            say("小美是一名护士。", at=T0 + DAY, session="s2"),
        ])
        hits = entity_route(engine=engine, scope=SCOPE, query="住在杭州的那个人做什么工作？",
                            limit=10, now=ports.clock())
        assert said(engine, "护士").id in [h.id for h in hits]


class TestErasureAndRebuild:
    def test_erasing_a_scope_leaves_no_entity_alias_mention_or_relation_of_it(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("My friend Mel moved to Tokyo last year.", at=T0),
            say("My cousin Jonas moved to Tokyo as well.", at=T0, scope=BOB),
        ])
        receipt = erase_scope(engine=engine, scope=SCOPE.owner.key,
                              ports=dataclasses.replace(ports, hot=RedisHotStore(redis, keys)),
                              audit_key=b"the deployment's audit key")
        assert receipt.removed["entities"] == len({"user", "Mel", "Tokyo"})
        with Session(engine) as s:
            for model in (Entity, EntityAlias, EntityMention, Relation):
                left = s.exec(select(model).where(col(model.scope_key) == SCOPE.owner.key))
                assert list(left) == [], model.__name__
        assert {"Jonas", "Tokyo"} <= set(entities(engine, BOB))

    def test_erasing_one_memory_takes_the_names_only_it_mentioned(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("My friend Mel moved to Tokyo last year.", at=T0, session="s1"),
            say("Mel works as a nurse at Saint Aldhelm hospital.", at=T0 + DAY, session="s2"),
        ])
        erase_memory(engine=engine, memory_id=said(engine, "nurse").id,
                     ports=dataclasses.replace(ports, hot=RedisHotStore(redis, keys)))
        left = entities(engine)
        assert "Saint Aldhelm" not in left and {"Mel", "Tokyo"} <= set(left)
        assert left["Mel"].mention_count == 1

    def test_reconsolidation_rebuilds_the_graph_of_the_versions_it_writes(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports, clock: Clock,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("My friend Mel moved to Tokyo last year.", at=T0)])
        job = create_job(engine=engine, scope_key=SCOPE.owner.key, now=clock.now)
        run_job(engine=engine, ports=ports, settings=settings, job_id=job.id)
        hits = entity_route(engine=engine, scope=SCOPE, query="Tokyo", limit=5,
                            now=ports.clock())
        assert [h.id for h in hits] == [said(engine, "Tokyo").id]
