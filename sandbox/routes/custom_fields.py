"""Custom field definitions (with options) and custom field values, account-wide and per entity.

Shapes: the live `custom-field-definitions.list/get` and `custom-field-options.list` captures (links
only, no meta) and the spec's `custom_field` schema. The live `GET /custom_fields` once answered 500
(API-NOTES 12.13); here it is served correctly and fails only through fault injection.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.routing import Route

from ..jsonapi import ApiError, api_error, document, error, not_found
from ..world import LazySeq
from ..world.custom_fields import CustomFieldStore, Definition, Value
from ..world.timeutil import to_epoch
from .common import list_document, one_document, read_data
from .context import Ctx, api

PAGE = 25  # spec default for /custom_fields and /custom_field_definitions (API-NOTES section 2)
ENTITY = {"shipments": ("shipment", "Shipment"), "containers": ("container", "Cargo"),
          "tracking_requests": ("tracking_request", "TrackingRequest")}
KIND_NAME = {"shipment": "Shipment", "container": "Container", "tracking_request": "TrackingRequest"}


def store_for(ctx: Ctx) -> CustomFieldStore:
    """The caller's account's custom field store, created (and seeded lazily) on first use."""
    name = ctx.principal.account
    stores = ctx.state.custom_fields
    if name not in stores:
        acct, world = ctx.account, ctx.world
        counts = acct.store.counts

        def container_ids(i: int) -> list[str]:
            return [acct.container_id(i, slot) for slot in range(int(counts[i]))]

        stores[name] = CustomFieldStore(world.seed, name, acct.n, world.start_ts, acct.shipment_id, container_ids)
    return stores[name]


def _pid(ctx: Ctx, name: str) -> str:
    return ctx.request.path_params[name]


def _definition(ctx: Ctx, store: CustomFieldStore, name: str = "id") -> Definition:
    d = store.definition(_pid(ctx, name))
    if d is None:
        raise not_found("CustomFieldDefinition", _pid(ctx, name))
    return d


def _deleted() -> dict:
    return {"meta": {}}


def _value_doc(ctx: Ctx, store: CustomFieldStore, v: Value) -> dict:
    return one_document(ctx, store.value_resource(v))


def _rendered(store: CustomFieldStore, rows: list[Value]) -> LazySeq:
    """Resources rendered only for the page served (an account can hold ~200k values)."""
    return LazySeq(len(rows), lambda k: store.value_resource(rows[k]))


def _created(ctx: Ctx, resource: dict, path: str) -> dict:
    return document(resource, links={"self": ctx.base(path)})


# ----- definitions ---------------------------------------------------------------------------------

@api()
async def list_definitions(ctx: Ctx) -> dict:
    """GET /custom_field_definitions: creation order, 25 a page, links only (live capture);
    filter[entity_type], filter[data_type] exact, filter[display_name] prefix."""
    store = store_for(ctx)
    p = ctx.params
    defs = store.list_definitions(entity_type=p.get("filter[entity_type]"), data_type=p.get("filter[data_type]"),
                                  display_name=p.get("filter[display_name]"))
    return list_document(ctx, [store.definition_resource(d) for d in defs], default_size=PAGE, meta="none")


@api(status=201)
async def create_definition(ctx: Ctx) -> dict:
    """POST /custom_field_definitions: entity_type, api_slug, display_name, data_type required."""
    store = store_for(ctx)
    d = store.create_definition((await read_data(ctx, "custom_field_definition"))["attributes"], to_epoch(ctx.now))
    return _created(ctx, store.definition_resource(d), f"/v2/custom_field_definitions/{d.id}")


@api()
async def get_definition(ctx: Ctx) -> dict:
    """GET /custom_field_definitions/{id}."""
    store = store_for(ctx)
    return one_document(ctx, store.definition_resource(_definition(ctx, store)))


@api()
async def patch_definition(ctx: Ctx) -> dict:
    """PATCH /custom_field_definitions/{id}: display_name, description, validation, default_*."""
    store = store_for(ctx)
    d = _definition(ctx, store)
    attrs = (await read_data(ctx, "custom_field_definition"))["attributes"]
    return one_document(ctx, store.definition_resource(store.update_definition(d.id, attrs, to_epoch(ctx.now))))


@api()
async def delete_definition(ctx: Ctx) -> dict:
    """DELETE /custom_field_definitions/{id}: also drops its options and values."""
    store = store_for(ctx)
    store.delete_definition(_definition(ctx, store).id)
    return _deleted()


# ----- options -------------------------------------------------------------------------------------

def _option(ctx: Ctx, store: CustomFieldStore, d: Definition) -> dict:
    oid = _pid(ctx, "option_id")
    opt = next((o for o in d.options if o["id"] == oid), None)
    if opt is None:
        raise not_found("CustomFieldOption", oid)
    return opt


@api()
async def list_options(ctx: Ctx) -> dict:
    """GET /custom_field_definitions/{definition_id}/options: by position, links only (live capture)."""
    store = store_for(ctx)
    d = _definition(ctx, store, "definition_id")
    return list_document(ctx, [store.option_resource(o) for o in store.sorted_options(d)], default_size=PAGE,
                         meta="none")


@api(status=201)
async def create_option(ctx: Ctx) -> dict:
    """POST /custom_field_definitions/{definition_id}/options: label and value required."""
    store = store_for(ctx)
    d = _definition(ctx, store, "definition_id")
    opt = store.create_option(d, (await read_data(ctx, "custom_field_option"))["attributes"])
    return _created(ctx, store.option_resource(opt), f"/v2/custom_field_definitions/{d.id}/options/{opt['id']}")


@api()
async def get_option(ctx: Ctx) -> dict:
    """GET /custom_field_definitions/{definition_id}/options/{option_id}."""
    store = store_for(ctx)
    return one_document(ctx, store.option_resource(_option(ctx, store, _definition(ctx, store, "definition_id"))))


@api()
async def patch_option(ctx: Ctx) -> dict:
    """PATCH /custom_field_definitions/{definition_id}/options/{option_id}: label, position."""
    store = store_for(ctx)
    d = _definition(ctx, store, "definition_id")
    opt = _option(ctx, store, d)
    attrs = (await read_data(ctx, "custom_field_option"))["attributes"]
    return one_document(ctx, store.option_resource(store.update_option(d, opt["id"], attrs)))


@api()
async def delete_option(ctx: Ctx) -> dict:
    """DELETE /custom_field_definitions/{definition_id}/options/{option_id}."""
    store = store_for(ctx)
    d = _definition(ctx, store, "definition_id")
    store.delete_option(d, _option(ctx, store, d)["id"])
    return _deleted()


# ----- values, account-wide ------------------------------------------------------------------------

def _value(ctx: Ctx, store: CustomFieldStore) -> Value:
    v = store.value(_pid(ctx, "id"))
    if v is None:
        raise not_found("CustomField", _pid(ctx, "id"))
    return v


def _entity(ctx: Ctx, kind: str, entity_id: str) -> None:
    if ctx.get(kind, entity_id) is None:
        raise not_found(KIND_NAME[kind], entity_id)


@api()
async def list_values(ctx: Ctx) -> dict:
    """GET /custom_fields: creation order, 25 a page, links only; filter[entity_type] (Shipment,
    Container), filter[entity_id], filter[definition_id]."""
    store = store_for(ctx)
    p = ctx.params
    rows = store.list_values(entity_type=p.get("filter[entity_type]"), entity_id=p.get("filter[entity_id]"),
                             definition_id=p.get("filter[definition_id]"))
    return list_document(ctx, _rendered(store, rows), default_size=PAGE, meta="none")


@api(status=201)
async def create_value(ctx: Ctx) -> dict:
    """POST /custom_fields: api_slug and value, relationships.entity a shipment or container."""
    store = store_for(ctx)
    data = await read_data(ctx, "custom_field")
    ent = ((data.get("relationships") or {}).get("entity") or {}).get("data")
    if not isinstance(ent, dict) or ent.get("type") not in KIND_NAME or not isinstance(ent.get("id"), str):
        raise ApiError(422, [error(422, "Unprocessable Entity", "entity must be {type: 'shipment'|'container'"
                                   "|'tracking_request', id: <uuid>}", pointer="/data/relationships/entity",
                                   code="invalid")])
    _entity(ctx, ent["type"], ent["id"])
    attrs = _with_value(data["attributes"])
    v = store.set_value(ent["type"], ent["id"], attrs.get("api_slug"), attrs["value"])
    return _created(ctx, store.value_resource(v), f"/v2/custom_fields/{v.id}")


@api()
async def get_value(ctx: Ctx) -> dict:
    """GET /custom_fields/{id}."""
    store = store_for(ctx)
    return _value_doc(ctx, store, _value(ctx, store))


def _with_value(attrs: dict) -> dict:
    """The attributes of a custom field write, which must carry a `value` (422 when blank)."""
    if "value" not in attrs:
        raise api_error(422, "Unprocessable Entity", "Value can't be blank", pointer="/data/attributes/value",
                        code="blank")
    return attrs


async def _new_value(ctx: Ctx) -> object:
    return _with_value((await read_data(ctx, "custom_field"))["attributes"])["value"]


@api()
async def patch_value(ctx: Ctx) -> dict:
    """PATCH /custom_fields/{id}: a new value, validated against the definition."""
    store = store_for(ctx)
    v = _value(ctx, store)
    return _value_doc(ctx, store, store.update_value(v, await _new_value(ctx)))


@api()
async def delete_value(ctx: Ctx) -> dict:
    """DELETE /custom_fields/{id}."""
    store = store_for(ctx)
    store.delete_value(_value(ctx, store).id)
    return _deleted()


# ----- values per entity ---------------------------------------------------------------------------

def _owner(ctx: Ctx) -> tuple[str, str, str]:
    """(resource type, definition entity_type, id) of the entity named by the path, 404 if unknown."""
    collection = ctx.request.url.path.split("/")[2]
    kind, etype = ENTITY[collection]
    entity_id = _pid(ctx, "entity_id")
    _entity(ctx, kind, entity_id)
    return kind, etype, entity_id


def _slug_value(ctx: Ctx, store: CustomFieldStore) -> Value:
    _, etype, entity_id = _owner(ctx)
    slug = _pid(ctx, "api_slug")
    d = store.by_slug(etype, slug)
    v = store.value_for(entity_id, d) if d is not None else None
    if v is None:
        raise not_found("CustomField", slug)
    return v


@api()
async def list_entity_values(ctx: Ctx) -> dict:
    """GET /{shipments|containers|tracking_requests}/{id}/custom_fields."""
    store = store_for(ctx)
    _, _, entity_id = _owner(ctx)
    return list_document(ctx, _rendered(store, store.list_values(entity_id=entity_id)), default_size=PAGE, meta="none")


@api(status=201)
async def create_entity_value(ctx: Ctx) -> dict:
    """POST /{shipments|containers|tracking_requests}/{id}/custom_fields: api_slug and value."""
    store = store_for(ctx)
    kind, _, entity_id = _owner(ctx)
    attrs = _with_value((await read_data(ctx, "custom_field"))["attributes"])
    v = store.set_value(kind, entity_id, attrs.get("api_slug"), attrs["value"])
    return _created(ctx, store.value_resource(v), f"/v2/custom_fields/{v.id}")


@api()
async def patch_entity_value(ctx: Ctx) -> dict:
    """PATCH /{shipments|containers|tracking_requests}/{id}/custom_fields/{api_slug}."""
    store = store_for(ctx)
    v = _slug_value(ctx, store)
    return _value_doc(ctx, store, store.update_value(v, await _new_value(ctx)))


@api()
async def delete_entity_value(ctx: Ctx) -> Response:
    """DELETE /{shipments|containers|tracking_requests}/{id}/custom_fields/{api_slug}: 204 (spec)."""
    store = store_for(ctx)
    store.delete_value(_slug_value(ctx, store).id)
    return Response(status_code=204)


def _entity_routes() -> list[Route]:
    out = []
    for collection in ENTITY:
        base = f"/v2/{collection}/{{entity_id}}/custom_fields"
        out += [Route(base, list_entity_values, methods=["GET"]),
                Route(base, create_entity_value, methods=["POST"]),
                Route(base + "/{api_slug}", patch_entity_value, methods=["PATCH"]),
                Route(base + "/{api_slug}", delete_entity_value, methods=["DELETE"])]
    return out


DEFS = "/v2/custom_field_definitions"
ROUTES = [
    Route(DEFS, list_definitions, methods=["GET"]),
    Route(DEFS, create_definition, methods=["POST"]),
    Route(DEFS + "/{id}", get_definition, methods=["GET"]),
    Route(DEFS + "/{id}", patch_definition, methods=["PATCH"]),
    Route(DEFS + "/{id}", delete_definition, methods=["DELETE"]),
    Route(DEFS + "/{definition_id}/options", list_options, methods=["GET"]),
    Route(DEFS + "/{definition_id}/options", create_option, methods=["POST"]),
    Route(DEFS + "/{definition_id}/options/{option_id}", get_option, methods=["GET"]),
    Route(DEFS + "/{definition_id}/options/{option_id}", patch_option, methods=["PATCH"]),
    Route(DEFS + "/{definition_id}/options/{option_id}", delete_option, methods=["DELETE"]),
    Route("/v2/custom_fields", list_values, methods=["GET"]),
    Route("/v2/custom_fields", create_value, methods=["POST"]),
    Route("/v2/custom_fields/{id}", get_value, methods=["GET"]),
    Route("/v2/custom_fields/{id}", patch_value, methods=["PATCH"]),
    Route("/v2/custom_fields/{id}", delete_value, methods=["DELETE"]),
    *_entity_routes(),
]
